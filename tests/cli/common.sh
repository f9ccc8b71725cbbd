# Helpers of the CLI test scripts (sourced): counters and the expect_* checks. The script
# sets CB (the binary) and TMP (a scratch directory) first.
pass=0
fail=0
skip=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

expect_ok() {  # name, command...
  local name="$1"; shift
  if out=$("$@" 2>"$TMP/err"); then ok; else bad "$name: exit $? ($(head -c 300 "$TMP/err"))"; fi
}
expect_out() {  # name, needle, command...
  local name="$1" needle="$2"; shift 2
  out=$("$@" 2>"$TMP/err")
  local rc=$?
  if [ $rc -eq 0 ] && grep -qF -- "$needle" <<<"$out"; then ok; else bad "$name: rc=$rc, wanted '$needle' in: $(head -c 400 <<<"$out") $(head -c 300 "$TMP/err")"; fi
}
expect_line() {  # name, a whole line of stdout, command...: exit 0 and that exact line
  local name="$1" line="$2"; shift 2
  out=$("$@" 2>"$TMP/err")
  local rc=$?
  if [ $rc -eq 0 ] && grep -qxF -- "$line" <<<"$out"; then ok; else bad "$name: rc=$rc, wanted the line '$line' in: $(head -c 400 <<<"$out") $(head -c 300 "$TMP/err")"; fi
}
# Every result file records the git revision of the binary that wrote it (as --version says).
REV=$("$CB" --version | sed -n 's/^ *git revision: *//p')
expect_git() {  # name, result file
  if python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get('git') == sys.argv[2] else 1)" \
    "$2" "$REV" 2>/dev/null; then ok; else bad "$1: $2 lacks \"git\": \"$REV\""; fi
}
expect_error() {  # name, path that must be named, needle, command...
  local name="$1" path="$2" needle="$3"; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$TMP/err")
  if [ $rc -eq 0 ]; then bad "$name: exit 0 on bad input"; return; fi
  if [ $rc -gt 2 ]; then bad "$name: exit $rc (crash or sanitizer?): $(head -c 600 "$TMP/err")"; return; fi
  if [ "$lines" -ne 1 ]; then bad "$name: want one error line, got $lines: $(head -c 600 "$TMP/err")"; return; fi
  if ! grep -qF -- "$path" "$TMP/err"; then bad "$name: error does not name $path: $(cat "$TMP/err")"; return; fi
  if [ -n "$needle" ] && ! grep -qiF -- "$needle" "$TMP/err"; then bad "$name: error lacks '$needle': $(cat "$TMP/err")"; return; fi
  ok
}

expect_usage_error() {  # name, option, needle, command...
  local name="$1" opt="$2" needle="$3"; shift 3
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ $rc -ne 2 ]; then bad "$name: exit $rc, wanted 2: $(head -c 300 "$TMP/err")"; return; fi
  if ! grep -qF -- "$opt: $needle" "$TMP/err"; then bad "$name: wanted '$opt: $needle' in: $(head -c 300 "$TMP/err")"; return; fi
  ok
}
