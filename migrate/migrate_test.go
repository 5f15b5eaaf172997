package migrate

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestReadOrdersAndRefusesBadHistories(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files fstest.MapFS
		want  string // "" for a valid history
		order []int
	}{
		{"ordered by version", fstest.MapFS{
			"m/0002_more.sql": {Data: []byte("B")}, "m/0001_init.sql": {Data: []byte("A")}, "m/0010_late.sql": {Data: []byte("C")},
		}, "", []int{1, 2, 10}},
		{"misnamed file", fstest.MapFS{"m/init.sql": {}}, "NNNN_name.sql", nil},
		{"upper case name", fstest.MapFS{"m/0001_Init.sql": {}}, "NNNN_name.sql", nil},
		{"version zero", fstest.MapFS{"m/0000_zero.sql": {}}, "bad version", nil},
		{"version used twice", fstest.MapFS{"m/0001_a.sql": {}, "m/001_b.sql": {}}, "used twice", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files, err := Read(tt.files, "m")
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range tt.order {
				if files[i].Version != v {
					t.Fatalf("order = %+v", files)
				}
			}
			if files[0].Name != "init" || files[0].SQL != "A" {
				t.Fatalf("first = %+v", files[0])
			}
		})
	}
}
