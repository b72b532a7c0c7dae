// Command checker decides whether a history recorded by tests/partition/workload.py
// is linearizable, handle by handle, with porcupine (a register per handle).
//
// Usage: checker [-timeout 60s] [-html DIR] HISTORY.jsonl
//
// Exit status: 0 every handle linearizable, 1 a handle is not (its history is
// drawn to DIR/<handle>.html when -html is given), 2 the check timed out for a
// handle (undecided, never counted as a pass), 3 the history cannot be read.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// event is one line of the history: an invocation ("invoke") or its completion
// ("ok": done, "fail": refused for sure, "info": outcome unknown, e.g. timed out).
type event struct {
	Type   string `json:"type"`
	ID     int64  `json:"id"`
	Client int    `json:"client"`
	Time   int64  `json:"t"`
	Op     string `json:"op"`
	Handle string `json:"handle"`
	Value  string `json:"value"`
	Found  bool   `json:"found"`
	Node   string `json:"node"`
	API    string `json:"api"`
}

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "time allowed per handle")
	htmlDir := flag.String("html", "", "directory for the drawings of non-linearizable handles")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: checker [-timeout D] [-html DIR] HISTORY.jsonl")
		os.Exit(3)
	}
	ops, stats, err := readHistory(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "checker:", err)
		os.Exit(3)
	}
	fmt.Printf("history: %d operations on %d handles (%d ok, %d refused, %d indeterminate, %d reads without answer dropped)\n",
		stats.total, len(ops), stats.ok, stats.fail, stats.info, stats.droppedReads)

	handles := make([]string, 0, len(ops))
	for h := range ops {
		handles = append(handles, h)
	}
	sort.Strings(handles)
	status := 0
	for _, h := range handles {
		res, info := porcupine.CheckOperationsVerbose(registerModel, ops[h], *timeout)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			fmt.Printf("UNDECIDED %s: the check timed out after %v (%d operations)\n", h, *timeout, len(ops[h]))
			if status == 0 {
				status = 2
			}
		case porcupine.Illegal:
			fmt.Printf("NOT LINEARIZABLE %s (%d operations)\n", h, len(ops[h]))
			status = 1
			explain(ops[h], *timeout)
			if *htmlDir != "" {
				path := filepath.Join(*htmlDir, strings.NewReplacer("/", "_", ".", "_").Replace(h)+".html")
				if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
					fmt.Printf("  drawn in %s\n", path)
				}
			}
		}
	}
	if status == 0 {
		fmt.Printf("linearizable: all %d handles\n", len(handles))
	}
	os.Exit(status)
}

// unknownClients is the first client id given to operations of unknown outcome.
const unknownClients = 1 << 20

type counts struct{ total, ok, fail, info, droppedReads int }

// readHistory pairs invocations with completions. An operation whose
// completion is "info" or missing (the client was stopped) may have taken
// effect at any time after its call, or never: porcupine's way is a return
// at the end of time with an output the model accepts whatever the state.
// A read without an answer constrains nothing and is dropped.
func readHistory(path string) (map[string][]porcupine.Operation, counts, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, counts{}, err
	}
	defer f.Close()
	calls := map[int64]event{}
	var order []int64
	done := map[int64]event{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for scanner.Scan() {
		line++
		var e event
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return nil, counts{}, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		switch e.Type {
		case "invoke":
			calls[e.ID] = e
			order = append(order, e.ID)
		case "ok", "fail", "info":
			done[e.ID] = e
		default:
			return nil, counts{}, fmt.Errorf("%s:%d: unknown event type %q", path, line, e.Type)
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, counts{}, err
	}
	var c counts
	ops := map[string][]porcupine.Operation{}
	// Indeterminate operations each get a client id of their own: porcupine
	// (and its drawing) expect one client's operations not to overlap.
	nextClient := unknownClients
	for _, id := range order {
		call := calls[id]
		c.total++
		in := input{Op: call.Op, Value: call.Value, Via: call.Node + "/" + call.API}
		end, completed := done[id]
		if !completed || end.Type == "info" {
			c.info++
			if call.Op == "read" {
				c.droppedReads++
				continue
			}
			ops[call.Handle] = append(ops[call.Handle], porcupine.Operation{
				ClientId: nextClient, Input: in, Call: call.Time,
				Output: output{Unknown: true}, Return: math.MaxInt64,
			})
			nextClient++
			continue
		}
		if end.Type == "ok" {
			c.ok++
		} else {
			c.fail++
		}
		ops[call.Handle] = append(ops[call.Handle], porcupine.Operation{
			ClientId: call.Client, Input: in, Call: call.Time,
			Output: output{Ok: end.Type == "ok", Found: end.Found, Value: end.Value}, Return: end.Time,
		})
	}
	return ops, c, nil
}
