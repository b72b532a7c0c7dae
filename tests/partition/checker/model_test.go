package main

import (
	"math"
	"testing"

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
