// The chaos run's linearizability check (test/chaos/linearizable.ts writes its input): porcupine, the checker
// etcd's own robustness tests use, over the fenced counter's history as a compare-and-set register.
//
//	linearizable [<visualization.html>] < history.json
//
// history.json is {"ops": [...]}: each op a client's read of the counter (`{"kind":"read","value":v}`) or a
// fenced write (`{"kind":"cas","from":v,"to":v+1,"ok":true|false}`), with `call` and `return` times (µs).
// An applied write whose answer never came has `return` past every other op's. It prints one JSON line:
// {"result":"Ok"|"Illegal"|"Unknown","ops":n}; for "Illegal" it writes porcupine's visualization, if asked.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

type op struct {
	Client int    `json:"client"`
	Kind   string `json:"kind"`
	Value  int    `json:"value"`
	From   int    `json:"from"`
	To     int    `json:"to"`
	Ok     bool   `json:"ok"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
}

// The counter as a register: a read sees its value; a write that landed moved it from `from` to `to`; a
// refused one (refused with its lock still held: the counter had moved) saw another value.
var register = porcupine.Model{
	Init: func() interface{} { return 0 },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		value := state.(int)
		in := input.(op)
		switch in.Kind {
		case "read":
			return in.Value == value, value
		case "cas":
			if in.Ok {
				return in.From == value, in.To
			}
			return in.From != value, value
		}
		return false, value
	},
	DescribeOperation: func(input, output interface{}) string {
		in := input.(op)
		if in.Kind == "read" {
			return fmt.Sprintf("read → %d", in.Value)
		}
		return fmt.Sprintf("cas %d → %d: %v", in.From, in.To, in.Ok)
	},
}

func main() {
	var history struct {
		Ops []op `json:"ops"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&history); err != nil {
		fmt.Fprintln(os.Stderr, "linearizable: reading the history:", err)
		os.Exit(2)
	}
	ops := make([]porcupine.Operation, len(history.Ops))
	for i, o := range history.Ops {
		ops[i] = porcupine.Operation{ClientId: o.Client, Input: o, Call: o.Call, Output: nil, Return: o.Return}
	}
	result, info := porcupine.CheckOperationsVerbose(register, ops, 60*time.Second)
	if result == porcupine.Illegal && len(os.Args) > 1 {
		if err := porcupine.VisualizePath(register, info, os.Args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "linearizable: writing the visualization:", err)
		}
	}
	out, _ := json.Marshal(map[string]any{"result": string(result), "ops": len(ops)})
	fmt.Println(string(out))
}
