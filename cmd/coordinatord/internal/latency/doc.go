// Package latency records latency distributions in HDR histograms and summarizes them as the
// percentiles the benchmarks report (p50, p90, p99, p99.9).
//
// A Histogram keeps every value from 1 ns to one minute with three significant digits (a
// relative error below 0.1 %), in constant memory whatever the number of samples. It is not safe
// for concurrent use: give each goroutine its own and Merge them at the end.
package latency
