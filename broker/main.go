package broker

import (
	"flag"
	"fmt"
	"os"
)

// Main runs `paddock broker` with args and returns the process exit code.
// Not implemented yet: it lands with the embedded broker issue.
func Main(args []string) int {
	fs := flag.NewFlagSet("paddock broker", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: paddock broker [flags]\n\nNot implemented yet: the broker lands with the embedded broker issue.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	fmt.Fprintln(os.Stderr, "paddock broker: not implemented yet")
	return 2
}
