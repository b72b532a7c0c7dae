# shellcheck shell=bash disable=SC2154  # $out comes from the round script
# The nemesis of the partition suites, sourced after netns.sh by a round script
# that defines `start NAME ROLE` and keeps each node's pid in $out/NAME.pid.
#
#   run_nemesis NEMESIS SECONDS PAUSE_SECONDS NODE:ROLE...
#
# Until SECONDS have passed: a quiet spell, then one strike on a random NODE
# (ROLE is what `start` restarts it as),
# then healed; every strike is healed before the next and before returning, so
# what follows (the verdicts) sees a whole network. One line per strike and heal
# ("strike kill b" ...), with the time since the start.
#   partition  NODE cut from every other node (not from the clients) for 10 s
#   pause      NODE stopped (SIGSTOP) for PAUSE_SECONDS, then continued
#   kill       NODE killed (SIGKILL), restarted 2 s later on the same data
#   skew       NODE killed and restarted with its clock off by up to 2 minutes
#              either way (HANDLED_CLOCK_OFFSET_MS, the clock that dates
#              multi-primary changes), within the 5 minutes a group allows
run_nemesis() {
  local nemesis=$1 seconds=$2 pause=$3 started=$SECONDS target role pid
  shift 3
  local nodes=("$@")
  # A strike needs up to ~pause + 5 s; none starts after the clients' end.
  while [ $((SECONDS - started + pause + 8)) -lt "$seconds" ]; do
    sleep 3
    target=${nodes[RANDOM % ${#nodes[@]}]}
    role=${target#*:} target=${target%%:*}
    pid=$(cat "$out/$target.pid")
    echo "strike $nemesis $target at $((SECONDS - started)) s"
    case $nemesis in
      partition) net_isolate "$target"; sleep 10; net_heal ;;
      pause) kill -STOP "$pid"; sleep "$pause"; kill -CONT "$pid" ;;
      kill)
        kill -9 "$pid"
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        sleep 2
        start "$target" "$role"
        ;;
      skew)
        kill -9 "$pid"
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
        local offset=$(((RANDOM % 241 - 120) * 1000))
        echo "clock of $target now off by $((offset / 1000)) s"
        HANDLED_CLOCK_OFFSET_MS=$offset start "$target" "$role"
        ;;
    esac
    echo "healed $target at $((SECONDS - started)) s"
  done
}
