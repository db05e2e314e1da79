/* core/src/core_params.h — the declared parameters of [run] and [system]
 * (core_params.c). */
#ifndef METRO__CORE_PARAMS_H
#define METRO__CORE_PARAMS_H

#include "metro/plugin.h"

extern const metro_param_decl metro__run_params[];
extern const metro_param_decl metro__system_params[];

#endif
