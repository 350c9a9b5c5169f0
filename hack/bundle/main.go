package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `Usage:
  bundle generate [flags] < manifests.yaml   (kustomize build config/manifests)
  bundle validate [flags]
Run "bundle <command> -h" for the flags of each.
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "generate":
		return runGenerate(args[1:], stdin, stderr)
	case "validate":
		return runValidate(args[1:], stdout, stderr)
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
}

func runGenerate(args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("bundle generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts generateOptions
	var channels, bundleDir, dockerfilePath string
	fs.StringVar(&opts.Package, "package", "paddock", "OLM package name")
	fs.StringVar(&opts.Version, "version", "0.1.0", "bundle version (semver, no leading v)")
	fs.StringVar(&channels, "channels", "candidate", "comma-separated channels")
	fs.StringVar(&opts.DefaultChannel, "default-channel", "", "default channel (default: the first channel)")
	fs.StringVar(&opts.Image, "image", "", "operator image (default: the one in the manifests)")
	fs.StringVar(&opts.CreatedAt, "created-at", "", "CSV createdAt (default: the one in the CSV base)")
	fs.StringVar(&opts.APIDir, "api-dir", "api/v1alpha1", "Go API package with the csv markers")
	fs.StringVar(&opts.IconPath, "icon", "config/manifests/paddock.svg", "SVG icon")
	fs.StringVar(&opts.Replaces, "replaces", "", "the CSV this bundle upgrades, <package>.v<older version> (the upgrade graph's edge; empty for a first release)")
	fs.StringVar(&opts.SkipRange, "skip-range", "", `semver range OLM may upgrade from straight to this version (olm.skipRange), e.g. ">=0.1.0 <0.2.0"`)
	fs.StringVar(&bundleDir, "bundle-dir", "bundle", "bundle output directory")
	fs.StringVar(&dockerfilePath, "dockerfile", "bundle.Dockerfile", "bundle Dockerfile to write")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for _, c := range strings.Split(channels, ",") {
		if c = strings.TrimSpace(c); c != "" {
			opts.Channels = append(opts.Channels, c)
		}
	}
	copyDir, err := relativeTo(filepath.Dir(dockerfilePath), bundleDir)
	if err != nil {
		fmt.Fprintln(stderr, "bundle generate:", err)
		return 1
	}
	opts.CopyDir = copyDir
	objs, err := decodeObjects(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "bundle generate:", err)
		return 1
	}
	out, err := generate(objs, opts)
	if err != nil {
		fmt.Fprintln(stderr, "bundle generate:", err)
		return 1
	}
	if err := writeBundle(bundleDir, dockerfilePath, out); err != nil {
		fmt.Fprintln(stderr, "bundle generate:", err)
		return 1
	}
	return 0
}

func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bundle validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bundleDir := fs.String("bundle-dir", "bundle", "bundle directory")
	dockerfilePath := fs.String("dockerfile", "bundle.Dockerfile", "bundle Dockerfile whose labels must match metadata/annotations.yaml")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	report := validateBundle(*bundleDir, *dockerfilePath)
	report.print(stdout)
	if len(report.Errors) > 0 {
		fmt.Fprintf(stderr, "bundle validate: %d error(s)\n", len(report.Errors))
		return 1
	}
	return 0
}

// relativeTo is target as a path relative to base (the Dockerfile's build context).
func relativeTo(base, target string) (string, error) {
	absBase, err := filepath.Abs(base)
	if err != nil {
		return "", err
	}
	absTarget, err := filepath.Abs(target)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absBase, absTarget)
	if err != nil {
		return "", fmt.Errorf("bundle dir %s is not reachable from the Dockerfile's directory %s: %w", target, base, err)
	}
	return filepath.ToSlash(rel), nil
}
