#!/bin/bash
# 200 threads (bench.Threads200): bare / sprig sample (timer) / sprig sample --source jvmti, 2 s windows in rotating order, 5 repeats;
# per window the units done a second and the safepoints HotSpot logged (count, time to reach: median/max µs).
# Usage: bash scripts/measure/sample-threads200.sh [JDK_HOME] [SPRIG]  (defaults: Temurin 25, target/release/sprig)
J=${1:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/java
S=${2:-target/release/sprig}
D=$(mktemp -d)
/usr/lib/jvm/java-17-openjdk-amd64/bin/javac -d $D fixtures/bench/src/bench/Threads200.java
rm -f $D/sp.log
mkfifo $D/in 2>/dev/null
exec 3<>$D/in
$J -Xlog:safepoint=info:file=$D/sp.log -cp $D bench.Threads200 200 <&3 > $D/out.txt 2>$D/err.txt &
PID=$!
sleep 5
ops() { echo ops >&3; sleep 0.3; tail -1 $D/out.txt | awk '{print $2}'; }
modes=(bare timer jvmti)
for rep in 0 1 2 3 4; do
  for i in 0 1 2; do
    w=$(( (i+rep) % 3 )); m=${modes[$w]}
    SP=""
    if [ $m = timer ]; then $S sample $PID --duration 4 --quiet -o /dev/null 2>/dev/null & SP=$!; sleep 1.2; fi
    if [ $m = jvmti ]; then $S sample $PID --source jvmti --duration 4 --quiet -o /dev/null 2>/dev/null & SP=$!; sleep 1.2; fi
    l0=$(grep -c 'Safepoint "' $D/sp.log); o0=$(ops); t0=$(date +%s.%N)
    sleep 2
    o1=$(ops); t1=$(date +%s.%N); l1=$(grep -c 'Safepoint "' $D/sp.log)
    reach=$(grep 'Safepoint "' $D/sp.log | sed -n "$((l0+1)),${l1}p" | sed 's/.*Reaching safepoint: \([0-9]*\) ns.*/\1/' | sort -n | awk '{a[NR]=$1} END{if(NR) printf "%d/%d", a[int((NR+1)/2)]/1000, a[NR]/1000; else printf "-"}')
    echo "rep $rep $m ops/s $(echo "($o1-$o0)/($t1-$t0)" | bc -l | cut -d. -f1) safepoints $((l1-l0)) reach_us_median/max $reach"
    [ -n "$SP" ] && wait $SP
  done
done
kill $PID; wait $PID 2>/dev/null; rm -rf $D
