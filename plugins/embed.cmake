# cmake -DIN=file.fatbin -DOUT=file.c -DSYM=name -P embed.cmake
# Writes a C file defining `const unsigned char SYM[]` and `SYM_size`
# holding the bytes of IN: how device IR travels inside a plugin .so.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){32})" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* generated from ${IN}; do not edit */\n#include <stddef.h>\n"
  "__attribute__((aligned(16))) const unsigned char ${SYM}[] = {\n${body}\n};\n"
  "const size_t ${SYM}_size = ${bytes};\n")
