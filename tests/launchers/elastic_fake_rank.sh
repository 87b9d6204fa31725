#!/bin/bash
# A stand-in rank for elastic_test.sh: needs no library. It prints what chorus-run gave it, then
# behaves as ELASTIC_FAKE asks (space-separated words, each RANK:ACTION; RANK "spare" for a spare
# of chorus-run --spares, CHORUS_SPARE=1):
#   R:fail     rank R exits 3 on its first start, succeeds once restarted (CHORUS_RESTART set)
#   R:kill     rank R SIGKILLs itself on its first start
#   R:always   rank R exits 3 on every start
#   R:publish  rank R, once restarted, writes chorus/elastic/last_change into the file store
#              (as the library's new rank 0 would after a membership change)
#   R:declare  rank R writes $ELASTIC_FAKE_CHANGE as chorus/elastic/last_change
#   R:hang     rank R sleeps 30 s on its first start (as a stopped or stuck rank)
#   R:unadmitted  rank R, once restarted, sleeps 20 s (a replacement that nobody admits)
#   R:register rank R, once restarted, registers as joiner 1 in the file store (as the library's
#              join() does), then exits 3
# Every other rank (and a rank once its action is done) sleeps ELASTIC_FAKE_SLEEP seconds (0.5), then
# exits 0.
echo "rank=$CHORUS_RANK join=${CHORUS_JOIN:-} restart=${CHORUS_RESTART:-} store=$CHORUS_STORE" \
  "spare=${CHORUS_SPARE:-} join_wait=${CHORUS_JOIN_WAIT:-} spares=${CHORUS_SPARES:-}"

# The file store's name for a key: "k" + the key in hex (src/store/file_store.cc).
file_store_path() {
  local dir=${CHORUS_STORE#file://}
  echo "$dir/k$(printf '%s' "$1" | od -An -tx1 | tr -d ' \n')"
}

# publish TEXT: TEXT becomes chorus/elastic/last_change (written, then renamed into place).
publish() {
  local path
  path=$(file_store_path chorus/elastic/last_change)
  mkdir -p "${path%/*}"  # the launcher may not have opened the store yet
  printf '%s' "$1" >"$path.tmp"
  mv "$path.tmp" "$path"
}

for word in ${ELASTIC_FAKE:-}; do
  if [[ ${CHORUS_SPARE:-} == 1 ]]; then
    [[ ${word%%:*} == spare ]] || continue
  else
    [[ ${word%%:*} == "$CHORUS_RANK" ]] || continue
  fi
  case ${word#*:} in
    fail) [[ -n ${CHORUS_RESTART:-} ]] || exit 3 ;;
    kill) [[ -n ${CHORUS_RESTART:-} ]] || kill -KILL $$ ;;
    always) exit 3 ;;
    publish) [[ -z ${CHORUS_RESTART:-} ]] || publish "generation=1 size=4 former=0,1,3,-1 lost=2 joined=1" ;;
    declare) publish "$ELASTIC_FAKE_CHANGE" ;;
    hang) [[ -n ${CHORUS_RESTART:-} ]] || sleep 30 ;;
    unadmitted) [[ -z ${CHORUS_RESTART:-} ]] || sleep 20 ;;
    register)
      if [[ -n ${CHORUS_RESTART:-} ]]; then
        mkdir -p "${CHORUS_STORE#file://}"
        printf 1 >"$(file_store_path chorus/elastic/joiners)"
        printf '%s pid %s' "$HOSTNAME" $$ >"$(file_store_path chorus/elastic/joiner/1)"
      fi
      exit 3
      ;;
  esac
done
sleep "${ELASTIC_FAKE_SLEEP:-0.5}"
