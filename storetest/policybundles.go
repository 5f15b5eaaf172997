package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var policyBundleCases = []suiteCase{
	{"StoredAsGiven", testPolicyBundlesStored},
	{"ListNewestFirst", testPolicyBundlesList},
	{"ConcurrentPublish", testPolicyBundlesConcurrent},
}

// fullPolicyBundle answers a bundle with every field set.
func fullPolicyBundle(org string, version int64, published time.Time) *toolplane.PolicyBundle {
	files := map[string]string{
		"policy.cedar": fmt.Sprintf("// version %d\npermit (principal, action, resource);\n", version),
		"tests.json":   `[{"name":"ünïcode ✓","expect":"allow"}]`,
		"empty.cedar":  "",
	}
	return &toolplane.PolicyBundle{
		OrganizationID: org, Version: version, Language: "cedar", Files: files,
		Digest: toolplane.PolicyBundleDigest(files), TimeZone: "Europe/Paris",
		PublishedBy: "user-admin", PublishedAt: published, Note: "refunds over 500 need a person",
	}
}

func insertPolicyBundle(t *testing.T, s toolplane.Store, b *toolplane.PolicyBundle) {
	t.Helper()
	if err := s.InsertPolicyBundle(t.Context(), b); err != nil {
		t.Fatalf("InsertPolicyBundle(%d) = %v", b.Version, err)
	}
}

// wantPolicyBundle fails unless the store answers b as stored.
func wantPolicyBundle(t *testing.T, s toolplane.Store, b *toolplane.PolicyBundle) {
	t.Helper()
	got, err := s.GetPolicyBundle(t.Context(), b.OrganizationID, b.Version)
	if err != nil {
		t.Fatalf("GetPolicyBundle(%d) = %v", b.Version, err)
	}
	want := *b
	want.PublishedAt = stored(b.PublishedAt).UTC()
	if d := diff(*got, want); d != "" {
		t.Errorf("GetPolicyBundle(%d): %s", b.Version, d)
	}
}

// testPolicyBundlesStored: a bundle is answered as stored, files byte for
// byte and the time to the microsecond; a second bundle at a stored
// version is refused with ErrExists and changes nothing; the version is
// the latest stored, 0 before the first; a version never stored is not
// found. A break-glass version (disabled, no files) is kept as such.
func testPolicyBundlesStored(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	org := newOrg()
	if v, err := s.PolicyBundleVersion(ctx, org); err != nil || v != 0 {
		t.Fatalf("PolicyBundleVersion before any = %d, %v; want 0", v, err)
	}
	b1 := fullPolicyBundle(org, 1, base)
	insertPolicyBundle(t, s, b1)
	wantPolicyBundle(t, s, b1)

	again := fullPolicyBundle(org, 1, at(time.Hour))
	again.Note = "another publish of version 1"
	if err := s.InsertPolicyBundle(ctx, again); !errors.Is(err, toolplane.ErrExists) {
		t.Errorf("InsertPolicyBundle at a stored version = %v; want ErrExists", err)
	}
	wantPolicyBundle(t, s, b1)

	off := &toolplane.PolicyBundle{OrganizationID: org, Version: 2, Disabled: true,
		Digest: toolplane.PolicyBundleDigest(nil), PublishedBy: "user-admin", PublishedAt: at(time.Minute), Note: "break glass"}
	insertPolicyBundle(t, s, off)
	got, err := s.GetPolicyBundle(ctx, org, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Disabled || len(got.Files) != 0 || got.Language != "" {
		t.Errorf("break-glass version = %+v; want disabled with no files", got)
	}
	if v, err := s.PolicyBundleVersion(ctx, org); err != nil || v != 2 {
		t.Errorf("PolicyBundleVersion = %d, %v; want 2", v, err)
	}
	if b, err := s.GetPolicyBundle(ctx, org, 3); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetPolicyBundle(3) = %+v, %v; want ErrNotFound", b, err)
	}
}

// testPolicyBundlesList: bundles are listed newest first, without their
// files, older than before when it is set, at most limit; a limit outside
// 1..1000 is ErrInvalid.
func testPolicyBundlesList(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	org := newOrg()
	for _, v := range shuffled(5) {
		insertPolicyBundle(t, s, fullPolicyBundle(org, int64(v+1), at(time.Duration(v)*time.Second)))
	}
	for _, c := range []struct {
		before int64
		limit  int
		want   []int64
	}{
		{0, maxLimit, []int64{5, 4, 3, 2, 1}},
		{0, 2, []int64{5, 4}},
		{4, 2, []int64{3, 2}},
		{2, maxLimit, []int64{1}},
		{1, maxLimit, nil},
	} {
		got, err := s.ListPolicyBundles(ctx, org, c.before, c.limit)
		if err != nil {
			t.Fatalf("ListPolicyBundles(before %d, limit %d) = %v", c.before, c.limit, err)
		}
		var versions []int64
		for _, b := range got {
			versions = append(versions, b.Version)
			if len(b.Files) != 0 {
				t.Errorf("ListPolicyBundles answered version %d with its files", b.Version)
			}
			want := fullPolicyBundle(org, b.Version, at(time.Duration(b.Version-1)*time.Second))
			want.Files, want.PublishedAt = b.Files, stored(want.PublishedAt).UTC()
			if d := diff(b, *want); d != "" {
				t.Errorf("listed version %d: %s", b.Version, d)
			}
		}
		if fmt.Sprint(versions) != fmt.Sprint(c.want) {
			t.Errorf("ListPolicyBundles(before %d, limit %d) = %v; want %v", c.before, c.limit, versions, c.want)
		}
	}
	for _, limit := range []int{0, -1, maxLimit + 1} {
		if _, err := s.ListPolicyBundles(ctx, org, 0, limit); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("ListPolicyBundles(limit %d) = %v; want ErrInvalid", limit, err)
		}
	}
}

// testPolicyBundlesConcurrent: of many publishes of the same next version
// at once, exactly one is stored, and it is the one answered.
func testPolicyBundlesConcurrent(t *testing.T, s toolplane.Store) {
	org := newOrg()
	insertPolicyBundle(t, s, fullPolicyBundle(org, 1, base))
	won := race(t, "InsertPolicyBundle", func(i int) *toolplane.PolicyBundle {
		b := fullPolicyBundle(org, 2, at(time.Duration(i)*time.Millisecond))
		b.Note = fmt.Sprint("writer ", i)
		return b
	}, func(b *toolplane.PolicyBundle) (bool, error) {
		return inserted(s.InsertPolicyBundle(t.Context(), b))
	})
	wantPolicyBundle(t, s, won)
}

// testIsolationPolicyBundles: one organization's bundles are neither read
// nor listed nor counted by another, and the same version number in two
// organizations is two bundles.
func testIsolationPolicyBundles(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := fullPolicyBundle(orgA, 1, base)
	insertPolicyBundle(t, s, a)
	insertPolicyBundle(t, s, fullPolicyBundle(orgA, 2, at(time.Second)))

	if b, err := s.GetPolicyBundle(ctx, orgB, 1); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("GetPolicyBundle as B = %+v, %v; want ErrNotFound", b, err)
	}
	if v, err := s.PolicyBundleVersion(ctx, orgB); err != nil || v != 0 {
		t.Errorf("PolicyBundleVersion as B = %d, %v; want 0", v, err)
	}
	if rows, err := s.ListPolicyBundles(ctx, orgB, 0, maxLimit); err != nil || len(rows) != 0 {
		t.Errorf("ListPolicyBundles as B = %d rows, %v; want none", len(rows), err)
	}
	b := fullPolicyBundle(orgB, 1, at(time.Hour))
	b.Files = map[string]string{"b.cedar": "forbid (principal, action, resource);"}
	insertPolicyBundle(t, s, b)
	wantPolicyBundle(t, s, a)
	wantPolicyBundle(t, s, b)
	if v, err := s.PolicyBundleVersion(ctx, orgB); err != nil || v != 1 {
		t.Errorf("PolicyBundleVersion as B = %d, %v; want 1", v, err)
	}
}
