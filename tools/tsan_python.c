/* tools/tsan_python.c: a Python interpreter with ThreadSanitizer's runtime
 * linked into the executable, for running dod's DOD_BUILD=tsan build.
 *
 * Python itself is not built with TSan, so the runtime has to come from
 * somewhere before any instrumented extension module loads. Preloading
 * clang's shared runtime (LD_PRELOAD=libclang_rt.tsan-x86_64.so) crashes at
 * start-up with Debian's clang-14 (the runtime depends on libstdc++, whose
 * initialiser calls the __cxa_atexit interceptor before TSan has set itself
 * up). Linked into the executable, the runtime initialises first, and its
 * symbols are exported to the extension modules.
 *
 * Build (tools/tsan_build_python.sh does this; .ci/run uses it):
 *   clang-14 -fsanitize=thread -O1 -g -I<INCLUDEPY> tools/tsan_python.c \
 *            -L<LIBDIR> -lpython3.X -Wl,-rpath,<LIBDIR> -o .venv/bin/python-tsan
 * Placed in a virtual environment's bin/, it uses that environment.
 */
#include <Python.h>

int main(int argc, char **argv) { return Py_BytesMain(argc, argv); }
