package canonical_test

import (
	"fmt"

	"github.com/toolplane/toolplane/canonical"
)

func ExampleMarshal() {
	out, err := canonical.Marshal(map[string]any{
		"limit": 25.0,
		"query": "caf\u00e9",
		"ids":   []any{uint64(12345678901234567890), 1e21},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
	// Output: {"ids":[12345678901234567890,1e+21],"limit":25,"query":"café"}
}

func ExampleHashJSON() {
	a, _ := canonical.HashJSON([]byte(`{"b": 1.0, "a": "\u00e9"}`))
	b, _ := canonical.HashJSON([]byte(`{"a":"é","b":1}`))
	fmt.Println(a == b)
	// Output: true
}

func ExampleKey() {
	key := canonical.Key("run-1", "agent", "a:b,c")
	fmt.Println(key)
	parts, err := canonical.SplitKey(key)
	fmt.Printf("%q %v\n", parts, err)
	// Output:
	// 5:run-1,5:agent,5:a:b,c
	// ["run-1" "agent" "a:b,c"] <nil>
}
