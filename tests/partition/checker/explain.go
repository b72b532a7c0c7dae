package main

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// shownOps is how many operations of the shortest failing prefix are printed:
// enough for the few that contradict each other, few enough for a CI log.
const shownOps = 16

// cutAt is the history as it stood at time t: the operations called by then,
// those not yet returned taken as unknown (a write may apply later or never;
// a read without an answer constrains nothing and is left out).
func cutAt(ops []porcupine.Operation, t int64) []porcupine.Operation {
	var prefix []porcupine.Operation
	for _, op := range ops {
		if op.Call > t {
			continue
		}
		if op.Return > t {
			if op.Input.(input).Op == "read" {
				continue
			}
			op.Output = output{Unknown: true}
			op.Return = math.MaxInt64
		}
		prefix = append(prefix, op)
	}
	return prefix
}

// shortestFailingPrefix finds the earliest return at which the history was
// already not linearizable (a history that is not stays so as it grows, so a
// binary search over the returns finds it), and that prefix.
func shortestFailingPrefix(ops []porcupine.Operation, timeout time.Duration) (int64, []porcupine.Operation, bool) {
	var returns []int64
	for _, op := range ops {
		if op.Return != math.MaxInt64 {
			returns = append(returns, op.Return)
		}
	}
	sort.Slice(returns, func(i, j int) bool { return returns[i] < returns[j] })
	illegal := func(i int) bool {
		res, _ := porcupine.CheckOperationsVerbose(registerModel, cutAt(ops, returns[i]), timeout)
		return res == porcupine.Illegal
	}
	i := sort.Search(len(returns), illegal)
	if i == len(returns) {
		return 0, nil, false
	}
	return returns[i], cutAt(ops, returns[i]), true
}

// explain prints, for a handle found not linearizable, the last operations of
// the shortest prefix of its history that is not: the ones that contradict
// each other are among them (ms from the first call; "?" an unknown outcome).
func explain(ops []porcupine.Operation, timeout time.Duration) {
	cut, prefix, found := shortestFailingPrefix(ops, timeout)
	if !found {
		fmt.Println("  why: no prefix shorter than the whole history fails")
		return
	}
	var start int64 = math.MaxInt64
	for _, op := range ops {
		if op.Call < start {
			start = op.Call
		}
	}
	ms := func(t int64) string {
		if t == math.MaxInt64 {
			return "         ?"
		}
		return fmt.Sprintf("%10.1f", float64(t-start)/1e6)
	}
	sort.SliceStable(prefix, func(i, j int) bool { return prefix[i].Call < prefix[j].Call })
	shown := prefix
	if len(shown) > shownOps {
		shown = shown[len(shown)-shownOps:]
	}
	fmt.Printf("  why: the shortest failing prefix ends at %s ms (%d operations); its last %d:\n",
		ms(cut), len(prefix), len(shown))
	for _, op := range shown {
		client := "c?" // an unknown outcome's operation has a client id of its own
		if op.ClientId < unknownClients {
			client = fmt.Sprintf("c%d", op.ClientId)
		}
		fmt.Printf("  why: %s %s  %-3s %s\n", ms(op.Call), ms(op.Return), client,
			registerModel.DescribeOperation(op.Input, op.Output))
	}
}
