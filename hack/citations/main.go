// Command citations is `make verify-citations`: it fails when a comment cites a document that
// is not in the repository, or a section that its docs/ note does not have.
//
// Read: the comments of Go files, whole-line # comments of shell scripts, Makefiles,
// Dockerfiles and YAML, and the prose of Markdown notes. A citation is the path of a Markdown
// file, or a path under the docs or seeds directories, with the section names that follow it:
// quoted (one, or several in parentheses) or numbered (§3). It resolves when the path exists
// in the repository — beside the citing file or from the root — and every quoted name is a
// heading of that note (the heading, or its first words) or one of its bold terms.
//
// Code comments cite the notes under docs/ only. A Markdown note may also name the design
// contract between issues, which lives outside the repository (contractDocs, and the notes'
// README), but nothing else outside it.
//
// Every problem is printed as file:line, the citation and why, then a count per area.
package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sort"
	"strings"
)

func main() {
	files, err := repoFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify-citations:", err)
		os.Exit(1)
	}
	repo := os.DirFS(".")
	var problems []Problem
	read := 0
	for _, name := range files {
		if KindOf(name) == Skip {
			continue
		}
		src, err := fs.ReadFile(repo, name)
		if err != nil || hasNUL(src) {
			continue // deleted in the work tree but not yet in the index, or binary
		}
		read++
		problems = append(problems, Check(repo, name, src)...)
	}
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "verify-citations: %d citations do not resolve (%s); a comment cites docs/ only, and a cited section must be a heading or bold term of its note\n",
			len(problems), strings.Join(count(problems), ", "))
		os.Exit(1)
	}
	fmt.Printf("verify-citations: every citation in %d files resolves\n", read)
}

// repoFiles lists the files git tracks and the untracked ones it does not ignore, so a new
// file is checked before it is committed.
func repoFiles() ([]string, error) {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	sort.Strings(files)
	return files, nil
}
