package main

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func op(client int, call, ret int64, i input, o output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: i, Call: call, Output: o, Return: ret}
}

// The checker must tell a lost acknowledged write and a double create from
// histories that are fine, or its verdicts mean nothing.
func TestRegisterModel(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
		ops  []porcupine.Operation
	}{
		{"create then read", true, []porcupine.Operation{
			op(0, 0, 10, input{Op: "create", Value: "a"}, output{Ok: true}),
			op(1, 20, 30, input{Op: "read"}, output{Ok: true, Found: true, Value: "a"}),
		}},
		{"lost acknowledged write", false, []porcupine.Operation{
			op(0, 0, 10, input{Op: "create", Value: "a"}, output{Ok: true}),
			op(0, 11, 12, input{Op: "modify", Value: "b"}, output{Ok: true}),
			op(1, 20, 30, input{Op: "read"}, output{Ok: true, Found: true, Value: "a"}),
		}},
		{"double create", false, []porcupine.Operation{
			op(0, 0, 10, input{Op: "create", Value: "a"}, output{Ok: true}),
			op(1, 20, 30, input{Op: "create", Value: "b"}, output{Ok: true}),
		}},
		{"concurrent creates, one refused", true, []porcupine.Operation{
			op(0, 0, 10, input{Op: "create", Value: "a"}, output{Ok: true}),
			op(1, 0, 10, input{Op: "create", Value: "b"}, output{Ok: false}),
			op(2, 20, 30, input{Op: "read"}, output{Ok: true, Found: true, Value: "a"}),
		}},
		{"indeterminate delete seen later", true, []porcupine.Operation{
			op(0, 0, 10, input{Op: "create", Value: "a"}, output{Ok: true}),
			op(5, 11, math.MaxInt64, input{Op: "delete"}, output{Unknown: true}),
			op(1, 40, 50, input{Op: "read"}, output{Ok: true, Found: false}),
		}},
		{"indeterminate delete never applied", true, []porcupine.Operation{
			op(0, 0, 10, input{Op: "create", Value: "a"}, output{Ok: true}),
			op(5, 11, math.MaxInt64, input{Op: "delete"}, output{Unknown: true}),
			op(1, 40, 50, input{Op: "read"}, output{Ok: true, Found: true, Value: "a"}),
		}},
		{"read of a value never written", false, []porcupine.Operation{
			op(0, 0, 10, input{Op: "put", Value: "a"}, output{Ok: true}),
			op(1, 20, 30, input{Op: "read"}, output{Ok: true, Found: true, Value: "z"}),
		}},
		{"modify of an absent handle refused", true, []porcupine.Operation{
			op(0, 0, 10, input{Op: "modify", Value: "a"}, output{Ok: false}),
			op(1, 20, 30, input{Op: "read"}, output{Ok: true, Found: false}),
		}},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(registerModel, c.ops); got != c.ok {
			t.Errorf("%s: linearizable = %v, want %v", c.name, got, c.ok)
		}
	}
}

// The shortest failing prefix ends where the contradiction is complete: at the
// read of a deleted value, not at the end of the history.
func TestShortestFailingPrefix(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 10, input{Op: "create", Value: "a"}, output{Ok: true}),
		op(0, 11, 20, input{Op: "delete"}, output{Ok: true}),
		op(1, 21, 30, input{Op: "read"}, output{Ok: true, Found: true, Value: "a"}),
		op(1, 31, 40, input{Op: "read"}, output{Ok: true}),
		op(2, 35, math.MaxInt64, input{Op: "put", Value: "b"}, output{Unknown: true}),
	}
	cut, prefix, found := shortestFailingPrefix(ops, time.Minute)
	if !found || cut != 30 || len(prefix) != 3 {
		t.Fatalf("cut %d, %d operations, found %v; want the prefix ending at the read at 30", cut, len(prefix), found)
	}
	if _, _, found := shortestFailingPrefix(ops[:2], time.Minute); found {
		t.Fatal("a linearizable history has no failing prefix")
	}
	// An operation still open at the cut is unknown there, whatever it answered later.
	late := []porcupine.Operation{
		op(0, 0, 10, input{Op: "create", Value: "a"}, output{Ok: true}),
		op(1, 5, 50, input{Op: "delete"}, output{Ok: false}),
		op(2, 20, 30, input{Op: "read"}, output{Ok: true}),
	}
	if cut, prefix, _ := shortestFailingPrefix(late, time.Minute); cut != 50 || len(prefix) != 3 {
		t.Fatalf("cut %d with %d operations; the refused delete makes it fail only once it returned", cut, len(prefix))
	}
}
