package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// csvMarkerPrefix starts the operator-sdk markers that describe a CRD in the CSV. On a type:
// displayName="..." and resources={{Kind,version,name},...}. On a field: type=spec|status,
// displayName="..." and xDescriptors={"urn:...",...}.
const csvMarkerPrefix = "+operator-sdk:csv:customresourcedefinitions:"

// apiType is what the source of one Go struct type in the API package says about it.
type apiType struct {
	Name   string
	Doc    string // the doc comment without marker lines, as one paragraph
	Root   bool   // +kubebuilder:object:root=true
	Marker *csvMarker
	Fields []apiField
}

// apiField is one field of an apiType.
type apiField struct {
	GoName   string
	JSONName string
	Inline   bool
	// Local is the API package type the field holds (directly or through a pointer); empty for
	// slices, maps and types from other packages, which descriptors do not descend into.
	Local  string
	Doc    string
	Marker *csvMarker
}

// csvMarker is one parsed +operator-sdk:csv:customresourcedefinitions marker.
type csvMarker struct {
	Pos  token.Position
	Args map[string]string // raw values: quoted strings and {lists} still unparsed
	used bool
}

// parseAPITypes reads every struct type of the Go package in dir (tests and generated files
// excluded) with its doc comments and csv markers.
func parseAPITypes(dir string) (map[string]*apiType, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read api dir: %w", err)
	}
	types := map[string]*apiType{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_generated") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				doc := ts.Doc
				if doc == nil && len(gen.Specs) == 1 {
					doc = gen.Doc
				}
				t, err := newAPIType(fset, ts.Name.Name, doc, st)
				if err != nil {
					return nil, err
				}
				types[t.Name] = t
			}
		}
	}
	return types, nil
}

func newAPIType(fset *token.FileSet, name string, doc *ast.CommentGroup, st *ast.StructType) (*apiType, error) {
	text, markers := splitDoc(fset, doc)
	t := &apiType{Name: name, Doc: text}
	for _, m := range markers {
		if m.text == "+kubebuilder:object:root=true" {
			t.Root = true
		}
	}
	var err error
	if t.Marker, err = csvMarkerOf(markers); err != nil {
		return nil, fmt.Errorf("type %s: %w", name, err)
	}
	for _, f := range st.Fields.List {
		field, err := newAPIField(fset, f)
		if err != nil {
			return nil, fmt.Errorf("type %s: %w", name, err)
		}
		if field != nil {
			t.Fields = append(t.Fields, *field)
		}
	}
	return t, nil
}

func newAPIField(fset *token.FileSet, f *ast.Field) (*apiField, error) {
	var tag reflect.StructTag
	if f.Tag != nil {
		raw, err := strconv.Unquote(f.Tag.Value)
		if err != nil {
			return nil, fmt.Errorf("field tag %s: %w", f.Tag.Value, err)
		}
		tag = reflect.StructTag(raw)
	}
	jsonTag := strings.Split(tag.Get("json"), ",")
	if jsonTag[0] == "-" {
		return nil, nil
	}
	field := &apiField{JSONName: jsonTag[0], Local: localTypeName(f.Type)}
	for _, opt := range jsonTag[1:] {
		if opt == "inline" {
			field.Inline = true
		}
	}
	if len(f.Names) > 0 {
		field.GoName = f.Names[0].Name
	} else {
		field.GoName = embeddedName(f.Type)
	}
	text, markers := splitDoc(fset, f.Doc)
	field.Doc = text
	var err error
	if field.Marker, err = csvMarkerOf(markers); err != nil {
		return nil, fmt.Errorf("field %s: %w", field.GoName, err)
	}
	return field, nil
}

// localTypeName is the name of the same-package type expr refers to, through one pointer.
func localTypeName(expr ast.Expr) string {
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	if id, ok := expr.(*ast.Ident); ok && !isPredeclared(id.Name) {
		return id.Name
	}
	return ""
}

func isPredeclared(name string) bool {
	switch name {
	case "bool", "string", "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16",
		"uint32", "uint64", "uintptr", "float32", "float64", "byte", "rune", "any":
		return true
	}
	return false
}

func embeddedName(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

type markerLine struct {
	pos  token.Position
	text string
}

// splitDoc separates a doc comment into its prose (joined into one paragraph, as controller-gen
// does for CRD descriptions) and its marker lines (those starting with '+').
func splitDoc(fset *token.FileSet, doc *ast.CommentGroup) (string, []markerLine) {
	if doc == nil {
		return "", nil
	}
	var prose []string
	var markers []markerLine
	for _, c := range doc.List {
		line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
		if strings.HasPrefix(line, "+") {
			markers = append(markers, markerLine{pos: fset.Position(c.Pos()), text: line})
			continue
		}
		if line != "" {
			prose = append(prose, line)
		}
	}
	return strings.Join(prose, " "), markers
}

// csvMarkerOf returns the one csv marker among markers, if any.
func csvMarkerOf(markers []markerLine) (*csvMarker, error) {
	var found *csvMarker
	for _, m := range markers {
		if !strings.HasPrefix(m.text, csvMarkerPrefix) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%s: more than one %s marker; put every argument in one", m.pos, csvMarkerPrefix)
		}
		args, err := parseMarkerArgs(strings.TrimPrefix(m.text, csvMarkerPrefix))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.pos, err)
		}
		found = &csvMarker{Pos: m.pos, Args: args}
	}
	return found, nil
}

// parseMarkerArgs splits `a=1,b="x,y",c={{p,q},{r,s}}` into its key=value pairs; commas inside
// quotes and braces do not split.
func parseMarkerArgs(s string) (map[string]string, error) {
	args := map[string]string{}
	for _, part := range splitTopLevel(s) {
		key, value, ok := strings.Cut(part, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, fmt.Errorf("marker argument %q is not key=value", part)
		}
		if _, dup := args[key]; dup {
			return nil, fmt.Errorf("marker argument %q given twice", key)
		}
		args[key] = strings.TrimSpace(value)
	}
	return args, nil
}

// splitTopLevel splits s at the commas that are outside quotes and braces.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start, inQuote := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && inQuote:
			i++
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == '{':
			depth++
		case c == '}':
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	if rest := s[start:]; strings.TrimSpace(rest) != "" || len(parts) > 0 {
		parts = append(parts, rest)
	}
	return parts
}

// markerString reads a quoted or bare string value.
func markerString(v string) (string, error) {
	if strings.HasPrefix(v, `"`) {
		return strconv.Unquote(v)
	}
	return v, nil
}

// markerList reads `{a,"b",c}` as its elements, each a raw value.
func markerList(v string) ([]string, error) {
	if !strings.HasPrefix(v, "{") || !strings.HasSuffix(v, "}") {
		return nil, fmt.Errorf("%q is not a {list}", v)
	}
	var items []string
	for _, item := range splitTopLevel(v[1 : len(v)-1]) {
		items = append(items, strings.TrimSpace(item))
	}
	return items, nil
}

// markerStrings reads `{"a","b"}` as strings.
func markerStrings(v string) ([]string, error) {
	items, err := markerList(v)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		s, err := markerString(item)
		if err != nil {
			return nil, fmt.Errorf("list element %s: %w", item, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// checkMarkerKeys fails on arguments a marker does not understand, so a typo cannot silently
// drop a descriptor field.
func checkMarkerKeys(m *csvMarker, allowed ...string) error {
	var unknown []string
	for k := range m.Args {
		if !contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("%s: unknown csv marker argument(s) %s (allowed: %s)", m.Pos, strings.Join(unknown, ", "), strings.Join(allowed, ", "))
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// displayNameOf turns a Go identifier into words: DrainTimeout → "Drain Timeout",
// ClusterID → "Cluster ID".
func displayNameOf(goName string) string {
	var b strings.Builder
	runes := []rune(goName)
	for i, r := range runes {
		if i > 0 && unicode.IsUpper(r) {
			prevLower := unicode.IsLower(runes[i-1])
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if prevLower || (nextLower && unicode.IsUpper(runes[i-1])) {
				b.WriteRune(' ')
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}
