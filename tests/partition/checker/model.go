package main

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// input is one operation on one handle's URL value (index 1).
//
//	create  create the handle with Value; refused when it exists (create-if-absent:
//	        native CREATE_HANDLE, JSON PUT ?overwrite=false)
//	modify  replace the value; refused when the handle is absent (native MODIFY_VALUE)
//	put     create or replace, never refused (JSON PUT, overwrite by default)
//	delete  remove the handle; refused when it is absent
//	read    the value, or absent
//
// The Handle protocol has no compare-and-swap on a value; create-if-absent and
// modify-if-present are its conditional writes, and what this model checks.
type input struct {
	Op    string
	Value string
	Via   string // node/api, for the drawing
}

// output: Ok (done, or for a read: answered), Found and Value for reads;
// Unknown when the outcome was never learnt.
type output struct {
	Ok      bool
	Found   bool
	Value   string
	Unknown bool
}

// state is the handle's value; absent is "" (the workload never writes "").
var registerModel = porcupine.Model{
	Init: func() interface{} { return "" },
	Step: func(s, in, out interface{}) (bool, interface{}) {
		state, i, o := s.(string), in.(input), out.(output)
		present := state != ""
		if o.Unknown {
			return true, applied(state, i)
		}
		switch i.Op {
		case "create":
			if present {
				return !o.Ok, state
			}
			return o.Ok, i.Value
		case "modify":
			if !present {
				return !o.Ok, state
			}
			return o.Ok, i.Value
		case "put":
			return o.Ok, i.Value
		case "delete":
			if !present {
				return !o.Ok, state
			}
			return o.Ok, ""
		case "read":
			if !o.Ok {
				return false, state
			}
			if !present {
				return !o.Found, state
			}
			return o.Found && o.Value == state, state
		}
		return false, state
	},
	Equal: func(a, b interface{}) bool { return a == b },
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(input), out.(output)
		result := "refused"
		switch {
		case o.Unknown:
			result = "?"
		case i.Op == "read" && o.Found:
			result = o.Value
		case i.Op == "read":
			result = "absent"
		case o.Ok:
			result = "done"
		}
		return fmt.Sprintf("%s(%s) -> %s [%s]", i.Op, i.Value, result, i.Via)
	},
	DescribeState: func(s interface{}) string {
		if s.(string) == "" {
			return "absent"
		}
		return s.(string)
	},
}

// applied is the state after an operation that took effect, when its
// outcome was not seen (the conditions still decide whether it could).
func applied(state string, i input) string {
	switch i.Op {
	case "create":
		if state == "" {
			return i.Value
		}
	case "modify":
		if state != "" {
			return i.Value
		}
	case "put":
		return i.Value
	case "delete":
		return ""
	}
	return state
}
