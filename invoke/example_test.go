package invoke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite"
)

type noteIn struct {
	CompanyID string `json:"company_id"`
	Text      string `json:"text"`
}

type noteOut struct {
	NoteID string `json:"note_id"`
}

// A write tool called twice with the same arguments in one run: one effect,
// and the second answer is the stored one, marked replayed.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "toolplane-example")
	defer os.RemoveAll(dir)
	db, _ := sqlite.Open(ctx, filepath.Join(dir, "toolplane.db"))
	defer db.Close()
	store := sqlite.New(db)
	_ = store.Migrate(ctx)

	// The tool's contract comes from its Go types.
	no := false
	d, _ := handler.Define[noteIn, noteOut](toolplane.Definition{
		Name: "crm.add_note", Version: "1.0.0", Description: "Add a note to a company.",
		Kind: toolplane.KindInternal, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "crm.add_note"}},
		Effect: toolplane.EffectWrite, Repeatable: &no,
	})
	effects := 0
	b, _ := handler.Bind("crm.add_note", func(_ context.Context, _ handler.Call, in noteIn) (noteOut, error) {
		effects++
		return noteOut{NoteID: fmt.Sprintf("note-%d", effects)}, nil
	}, nil)
	handlers := handler.NewRegistry()
	_ = handlers.Register(b)
	reg, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: exampleBindings{handlers}})
	if err != nil {
		fmt.Println(err)
		return
	}
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: handlers, Store: store, Policy: policy.Grants{}})

	call := &toolplane.Invocation{
		OrganizationID: "org-1", RunID: "run-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"crm.add_note"}},
	}
	args := []byte(`{"company_id":"co_42","text":"Renewal call booked for Tuesday."}`)
	for range 2 {
		r, err := iv.InvokeJSON(ctx, "crm.add_note", args, call)
		if err != nil {
			fmt.Println(err)
			return
		}
		data, _ := json.Marshal(r.Data)
		fmt.Printf("ok=%v replayed=%v data=%s\n", r.OK, r.Meta.Replayed, data)
	}
	fmt.Println("effects:", effects)
	// Output:
	// ok=true replayed=false data={"note_id":"note-1"}
	// ok=true replayed=true data={"note_id":"note-1"}
	// effects: 1
}

type exampleBindings struct{ *handler.Registry }

func (exampleBindings) Connection(string) bool   { return false }
func (exampleBindings) FactResolver(string) bool { return false }
