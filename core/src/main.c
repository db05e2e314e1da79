/* core/src/main.c — the `metro` program (everything is in libmetro). */
#include "metro/metro.h"

int main(int argc, char **argv)
{
    return metro_main(argc, argv);
}
