// Command namespaced-install turns the installation `kustomize build config/default` writes
// into that of a manager watching only the given namespaces (internal/install.Namespaced):
//
//	kustomize build config/default | go run ./hack/namespaced-install --namespaces=a,b
//
// `make build-installer NAMESPACES=a,b` runs it.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/paddock-dev/paddock/internal/install"
)

func main() {
	namespaces := flag.String("namespaces", "", "comma-separated namespaces the manager watches")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, strings.Split(*namespaces, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "namespaced-install:", err)
		os.Exit(1)
	}
}

// run reads a YAML stream from in and writes its namespaced version to out.
func run(in io.Reader, out io.Writer, namespaces []string) error {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(in, 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the installation: %w", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	objs, err := install.Namespaced(objs, namespaces)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	for i, obj := range objs {
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	_, err = out.Write(buf.Bytes())
	return err
}
