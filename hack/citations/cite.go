package main

import (
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Citation is one mention of a document: where it stands, the path as written, and the
// sections named right after it (a quoted heading, or a § number).
type Citation struct {
	File string // the citing file, relative to the repository root
	Line int
	Doc  string   // as written: a Markdown path (from the root, or beside the citing note) or a directory
	Quot []string // quoted section names, white space folded
	Num  []string // § numbers, as written
}

func (c Citation) String() string {
	s := c.Doc
	for _, q := range c.Quot {
		s += fmt.Sprintf(" %q", q)
	}
	for _, n := range c.Num {
		s += " §" + n
	}
	return s
}

// Problem is a citation that does not resolve, and why.
type Problem struct {
	Citation
	Why string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Citation, p.Why)
}

// Kind is how a file's comments are found.
type Kind int

const (
	// Skip: a file whose comments are not read (data, generated YAML strings, binaries).
	Skip Kind = iota
	// Go: // and /* */ comments.
	Go
	// Hash: whole-line # comments (shell, Makefile, YAML, Dockerfile), and a Makefile
	// target's "## help" text.
	Hash
	// Markdown: all prose outside fenced code blocks. A note may name the design contract,
	// which lives outside the repository (see contractDocs); every other document it
	// cites must be in the repository.
	Markdown
)

// contractDocs are documents outside the repository that a Markdown note may name (the
// contract between issues: docs/README.md). Code comments may not: they cite docs/ only.
var contractDocs = map[string]bool{"DESIGN.md": true}

// KindOf says how the file at p (slash-separated, relative to the root) is read.
func KindOf(p string) Kind {
	base := path.Base(p)
	switch {
	case strings.HasSuffix(base, ".go"):
		return Go
	case strings.HasSuffix(base, ".md"):
		return Markdown
	case base == "Makefile" || base == "Dockerfile" || strings.HasSuffix(base, ".Dockerfile") ||
		strings.HasSuffix(base, ".sh") || strings.HasSuffix(base, ".mk") ||
		strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml"):
		return Hash
	}
	return Skip
}

// passage is a run of comment text (or Markdown prose) that starts on line first; a
// citation may continue over its line breaks.
type passage struct {
	first int
	text  string
}

func (p passage) lineAt(off int) int { return p.first + strings.Count(p.text[:off], "\n") }

// passages returns the text of src that is read for citations, as kind k says.
func passages(k Kind, src []byte) []passage {
	switch k {
	case Go:
		return goComments(src)
	case Hash:
		return hashComments(src)
	case Markdown:
		return markdownProse(src)
	}
	return nil
}

// goComments returns the comments of a Go file; consecutive // lines form one passage.
func goComments(src []byte) []passage {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var out []passage
	last := -1 // line of the last // comment appended to out's tail
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok != token.COMMENT {
			last = -1
			continue
		}
		line := file.Line(pos)
		if text, ok := strings.CutPrefix(lit, "//"); ok {
			if last >= 0 && line == last+1 && len(out) > 0 {
				out[len(out)-1].text += "\n" + text
			} else {
				out = append(out, passage{first: line, text: text})
			}
			last = line
			continue
		}
		out = append(out, passage{first: line, text: strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/")})
		last = -1
	}
}

// hashComments returns the whole-line # comments (consecutive lines form one passage) and
// the "## help" text of Makefile targets.
func hashComments(src []byte) []passage {
	var out []passage
	prev := -2
	for i, line := range strings.Split(string(src), "\n") {
		n := i + 1
		trimmed := strings.TrimLeft(line, " \t")
		var text string
		switch {
		case strings.HasPrefix(trimmed, "#!"):
			continue
		case strings.HasPrefix(trimmed, "#"):
			text = strings.TrimLeft(trimmed, "#")
		default:
			if _, help, ok := strings.Cut(line, " ## "); ok && strings.Contains(line, ":") {
				out = append(out, passage{first: n, text: help})
			}
			continue
		}
		if prev == n-1 && len(out) > 0 {
			out[len(out)-1].text += "\n" + text
		} else {
			out = append(out, passage{first: n, text: text})
		}
		prev = n
	}
	return out
}

// markdownProse returns a Markdown file without its fenced code blocks (one passage per run
// of lines outside a fence).
func markdownProse(src []byte) []passage {
	var out []passage
	var cur []string
	first, fenced := 1, false
	flush := func(next int) {
		if len(cur) > 0 {
			out = append(out, passage{first: first, text: strings.Join(cur, "\n")})
		}
		cur, first = nil, next
	}
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			flush(i + 2)
			continue
		}
		if !fenced {
			cur = append(cur, line)
		}
	}
	flush(0)
	return out
}

// docPath finds what may name a document: a Markdown file, or a path under the docs
// directory or the seeds directory (the seed documents, which are not in the repository).
var docPath = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b|\b(?:docs|seeds)/[A-Za-z0-9_./-]*`)

// url finds web addresses, whose paths are not citations.
var url = regexp.MustCompile(`[a-z]+://\S+`)

// find returns the citations in p (File unset).
func find(p passage) []Citation {
	text := url.ReplaceAllStringFunc(p.text, func(s string) string { return strings.Repeat(" ", len(s)) })
	var out []Citation
	for _, m := range docPath.FindAllStringIndex(text, -1) {
		start, end := m[0], m[1]
		if start > 0 && isPathByte(text[start-1]) {
			continue // the tail of a longer word, such as foo/docs/x
		}
		doc := strings.TrimRight(text[start:end], ".")
		c := Citation{Line: p.lineAt(start), Doc: doc}
		c.Quot, c.Num = sections(text[start+len(doc):])
		out = append(out, c)
	}
	return out
}

func isPathByte(b byte) bool {
	return b == '/' || b == '.' || b == '-' || b == '_' || b < utf8.RuneSelf && (unicode.IsLetter(rune(b)) || unicode.IsDigit(rune(b)))
}

// sections reads the section names that follow a document's name: an optional comma or
// opening parenthesis, then quoted names and § numbers separated by commas, semicolons or
// "and": `, "Produce"`, ` ("Storage", "Draining")`, ` §1–§3`.
func sections(rest string) (quoted, numbered []string) {
	i := 0
	space := func() {
		for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t' || rest[i] == '\n') {
			i++
		}
	}
	space()
	if i < len(rest) && rest[i] == ',' {
		i++
		space()
	}
	if i < len(rest) && rest[i] == '(' {
		i++
	}
	for {
		space()
		switch {
		case strings.HasPrefix(rest[i:], `"`):
			j := strings.IndexByte(rest[i+1:], '"')
			if j < 0 {
				return
			}
			quoted = append(quoted, strings.Join(strings.Fields(rest[i+1:i+1+j]), " "))
			i += j + 2
		case strings.HasPrefix(rest[i:], "§"):
			j := i + len("§")
			for j < len(rest) && (rest[j] >= '0' && rest[j] <= '9' || rest[j] == '.' || strings.HasPrefix(rest[j:], "–") || strings.HasPrefix(rest[j:], "§")) {
				_, n := utf8.DecodeRuneInString(rest[j:])
				j += n
			}
			numbered = append(numbered, strings.TrimRight(rest[i+len("§"):j], "."))
			i = j
		default:
			return
		}
		space()
		switch {
		case strings.HasPrefix(rest[i:], ","), strings.HasPrefix(rest[i:], ";"):
			i++
		case strings.HasPrefix(rest[i:], "and "):
			i += len("and ")
		default:
			return
		}
	}
}

// Check returns the problems of the citations in the file at name (relative to the root of
// repo), whose content is src.
func Check(repo fs.FS, name string, src []byte) []Problem {
	k := KindOf(name)
	var out []Problem
	for _, p := range passages(k, src) {
		for _, c := range find(p) {
			c.File = name
			if why := resolve(repo, k, c); why != "" {
				out = append(out, Problem{Citation: c, Why: why})
			}
		}
	}
	return out
}

// resolve returns why c does not resolve in repo, or "" when it does. A path is looked up
// beside the citing file, then from the root.
func resolve(repo fs.FS, k Kind, c Citation) string {
	target := ""
	for _, p := range []string{path.Join(path.Dir(c.File), c.Doc), path.Clean(c.Doc)} {
		if st, err := fs.Stat(repo, p); err == nil && (st.IsDir() || !strings.HasSuffix(c.Doc, "/")) {
			target = p
			break
		}
	}
	switch {
	case target == "" && k == Markdown && contractDocs[c.Doc]:
		return "" // the contract, named by a note
	case target == "" && k == Markdown:
		return "not in the repository: bring what the note relies on into docs/ and cite that"
	case target == "":
		return "not in the repository: comments cite docs/ files only (move what it says into docs/ and cite that)"
	case len(c.Quot)+len(c.Num) == 0 || !strings.HasSuffix(target, ".md"):
		return ""
	}
	src, err := fs.ReadFile(repo, target)
	if err != nil {
		return fmt.Sprintf("cannot read %s: %v", target, err)
	}
	names := named(src)
	var missing []string
	for _, q := range c.Quot {
		if !names.has(q) {
			missing = append(missing, fmt.Sprintf("%q", q))
		}
	}
	for _, n := range c.Num {
		if !names.numbered(n) {
			missing = append(missing, "§"+n)
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("%s has no heading or bold term %s", target, strings.Join(missing, ", "))
	}
	return ""
}

// names are what a section citation may name in a Markdown file: its headings and its bold
// terms (`**Never unassign everything**`), code spans unquoted.
type names struct{ headings, bold []string }

var boldTerm = regexp.MustCompile(`\*\*([^*]+)\*\*`)

func named(src []byte) names {
	var n names
	for _, p := range markdownProse(src) {
		for _, line := range strings.Split(p.text, "\n") {
			if h, ok := strings.CutPrefix(line, "#"); ok {
				n.headings = append(n.headings, plain(strings.TrimLeft(h, "# ")))
			}
		}
		for _, m := range boldTerm.FindAllStringSubmatch(p.text, -1) {
			n.bold = append(n.bold, plain(m[1]))
		}
	}
	return n
}

// plain folds white space and drops code-span backquotes and a trailing period or colon.
func plain(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "`", "")), " ")
	return strings.TrimRight(s, ".:")
}

// has reports whether q names a heading — the whole heading, or its first words, as in
// "Import rules" for "Import rules (hack/verify-imports.sh, run by make verify)" — or a bold
// term exactly.
func (n names) has(q string) bool {
	q = plain(q)
	for _, h := range n.headings {
		if h == q || strings.HasPrefix(h, q) && !isWordByte(h[len(q)]) {
			return true
		}
	}
	for _, b := range n.bold {
		if b == q {
			return true
		}
	}
	return false
}

// numbered reports whether a heading starts with section number num ("3", "1.1", "§3").
func (n names) numbered(num string) bool {
	for _, h := range n.headings {
		h = strings.TrimPrefix(h, "§")
		if rest, ok := strings.CutPrefix(h, num); ok && (rest == "" || rest[0] == ' ' || rest[0] == '.') {
			return true
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= utf8.RuneSelf || unicode.IsLetter(rune(b)) || unicode.IsDigit(rune(b))
}

// count returns how many of ps fall under each top-level area, the broker's rooms split out,
// so each owner finds their part (`broker/storage 8`).
func count(ps []Problem) []string {
	by := map[string]int{}
	var order []string
	for _, p := range ps {
		area := strings.SplitN(p.File, "/", 3)
		key := area[0]
		if len(area) == 3 && (area[0] == "broker" || area[0] == "controllers" || area[0] == "internal" || area[0] == "test") {
			key += "/" + area[1]
		}
		if by[key] == 0 {
			order = append(order, key)
		}
		by[key]++
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, fmt.Sprintf("%s %d", k, by[k]))
	}
	return out
}

// hasNUL reports a binary file.
func hasNUL(src []byte) bool { return bytes.IndexByte(src, 0) >= 0 }
