package monitoring

import (
	"os"
	"testing"

	"github.com/paddock-dev/paddock/test/kubebrokers"
)

func TestMain(m *testing.M) {
	os.Exit(kubebrokers.Main(m, "monitoring"))
}
