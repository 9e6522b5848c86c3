#!/usr/bin/env bash
# Build tools/tsan_python.c into VENV/bin/python-tsan: the venv's Python with
# ThreadSanitizer's runtime in the executable (why: tools/tsan_python.c).
# Usage: tools/tsan_build_python.sh VENV [CC]   (CC defaults to $CC, then clang-14)
set -euo pipefail
venv=${1:?usage: tools/tsan_build_python.sh VENV [CC]}
cc=${2:-${CC:-clang-14}}
here=$(cd "$(dirname "$0")" && pwd)
read -r inc libdir ldversion shared < <("$venv/bin/python" -c '
import sysconfig as s
v = s.get_config_var
print(v("INCLUDEPY"), v("LIBDIR"), v("LDVERSION"), v("Py_ENABLE_SHARED") or 0)')
if [ "$shared" != 1 ]; then
    echo "tsan_build_python.sh: this Python has no shared libpython (built without --enable-shared)" >&2
    exit 1
fi
"$cc" -fsanitize=thread -O1 -g -I"$inc" "$here/tsan_python.c" \
    -L"$libdir" -lpython"$ldversion" -Wl,-rpath,"$libdir" -o "$venv/bin/python-tsan"
"$venv/bin/python-tsan" -c 'import sys; assert sys.prefix != sys.base_prefix, "not in the venv"'
echo "$venv/bin/python-tsan"
