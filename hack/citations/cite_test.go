package main

import (
	"strings"
	"testing"
	"testing/fstest"
)

// repo is a small repository: two notes and the files that cite them.
var repo = fstest.MapFS{
	"docs/storage.md": {Data: []byte("# Storage\n\n## Layout\n\nText.\n\n### Import rules (`hack/verify-imports.sh`, run by `make verify`)\n\n" +
		"- **Never unassign everything**: keep it.\n\n```\n## Not a heading\n```\n\n## 3. Numbered\n")},
	"docs/wire.md": {Data: []byte("# Wire\n\n## Addresses\n")},
	"hack/x.sh":    {Data: []byte("")},
}

// problems checks src as the file name and returns each problem as "line: citation".
func problems(t *testing.T, name, src string) []string {
	t.Helper()
	var out []string
	for _, p := range Check(repo, name, []byte(src)) {
		out = append(out, strings.TrimPrefix(p.String(), name+":"))
	}
	return out
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
}

func TestACommentCitingADocumentOutsideTheRepositoryFails(t *testing.T) {
	src := "package x\n\n// The layout (DESIGN.md \"Layout\").\n// Sequences follow DATAPLANE.md §3;\n// the seed (seeds/000.txt) too.\nvar x = 1 // and docs/nope.md\n"
	got := problems(t, "api/x.go", src)
	expect(t, got,
		`3: DESIGN.md "Layout": not in the repository`,
		`4: DATAPLANE.md §3: not in the repository`,
		`5: seeds/000.txt: not in the repository`,
		`6: docs/nope.md: not in the repository`)
}

func TestACitationOfARepositoryNoteAndItsHeadingPasses(t *testing.T) {
	src := `package x

// See docs/storage.md, "Layout"; docs/storage.md ("Storage", "Layout") and docs/wire.md.
// The first words of a heading name it: docs/storage.md, "Import rules". A bold term too:
// docs/storage.md "Never unassign everything". Numbered: docs/storage.md §3.
`
	expect(t, problems(t, "internal/x/x.go", src))
}

func TestACitedSectionMustBeAHeadingOrBoldTermOfTheNote(t *testing.T) {
	src := `package x

// docs/storage.md, "Nope"; docs/storage.md "Lay" (a heading's first letters are not its first
// words); docs/storage.md ("Layout", "Gone"); docs/storage.md "Not a heading" (in a code
// block); docs/storage.md §4.
`
	expect(t, problems(t, "x.go", src),
		`3: docs/storage.md "Nope": docs/storage.md has no heading or bold term "Nope"`,
		`3: docs/storage.md "Lay": docs/storage.md has no heading or bold term "Lay"`,
		`4: docs/storage.md "Layout" "Gone": docs/storage.md has no heading or bold term "Gone"`,
		`4: docs/storage.md "Not a heading": docs/storage.md has no heading`,
		`5: docs/storage.md §4: docs/storage.md has no heading or bold term §4`)
}

func TestACitationContinuesOverCommentLines(t *testing.T) {
	src := "package x\n\n// as the note says (docs/storage.md,\n//\t\"Import\n// rules\"), and DESIGN.md\n// \"one owner per group\".\n"
	expect(t, problems(t, "x.go", src), `5: DESIGN.md "one owner per group": not in the repository`)
}

func TestStringLiteralsAreNotComments(t *testing.T) {
	src := "package x\n\nconst help = \"see DESIGN.md\" // fine: docs/wire.md, \"Addresses\"\n"
	expect(t, problems(t, "x.go", src))
}

func TestWebAddressesAreNotCitations(t *testing.T) {
	src := "package x\n\n// https://example.org/blob/main/DESIGN.md and https://example.org/docs/x.md\n"
	expect(t, problems(t, "x.go", src))
}

func TestScriptMakefileAndYAMLCommentsAreRead(t *testing.T) {
	expect(t, problems(t, "hack/y.sh", "#!/usr/bin/env bash\n# Rules of DESIGN.md \"Layout\".\necho DESIGN.md\n"),
		`2: DESIGN.md "Layout": not in the repository`)
	expect(t, problems(t, "Makefile", "## Build\nbuild: ## Build it (REFERENCE.md §4).\n\tgo build # REFERENCE.md\n"),
		`2: REFERENCE.md §4: not in the repository`)
	expect(t, problems(t, "config/x.yaml", "a: 1\n  # see\n  # docs/nope.md\nb: \"DESIGN.md\"\n"),
		`3: docs/nope.md: not in the repository`)
}

func TestAPathIsLookedUpBesideTheCitingFileThenFromTheRoot(t *testing.T) {
	expect(t, problems(t, "docs/a.md", "# A\n\nSee wire.md, \"Addresses\", and docs/wire.md, and [the note](storage.md#layout).\n"))
	expect(t, problems(t, "x.go", "package x\n\n// wire.md, \"Addresses\"\n"), `3: wire.md "Addresses": not in the repository`)
}

func TestANoteMayNameTheContractButNothingElseOutsideTheRepository(t *testing.T) {
	src := "# A\n\nDESIGN.md \"Topics\" is the contract; deviations from DESIGN.md below.\nThe table is in REFERENCE.md §1.\n\n```\nSTYLE.md in a code block\n```\nwire.md, \"Nope\"\n"
	expect(t, problems(t, "docs/a.md", src),
		`4: REFERENCE.md §1: not in the repository: bring what the note relies on into docs/`,
		`9: wire.md "Nope": docs/wire.md has no heading or bold term "Nope"`)
}

func TestTheCountNamesEachArea(t *testing.T) {
	ps := []Problem{{Citation: Citation{File: "broker/storage/a.go"}}, {Citation: Citation{File: "broker/a.go"}},
		{Citation: Citation{File: "broker/storage/b.go"}}, {Citation: Citation{File: "main.go"}}}
	if got, want := strings.Join(count(ps), ", "), "broker/storage 2, broker 1, main.go 1"; got != want {
		t.Errorf("count = %q, want %q", got, want)
	}
}
