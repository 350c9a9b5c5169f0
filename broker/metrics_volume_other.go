//go:build !linux

package broker

import "github.com/prometheus/client_golang/prometheus"

// Only Linux reports the volume's size (statfs); elsewhere the series are absent.
func describeVolume(chan<- *prometheus.Desc)         {}
func collectVolume(chan<- prometheus.Metric, string) {}
