// Package retryprom exports the read-retry engine's counters (SPEC R17) and a
// retry budget's (SPEC B4) to Prometheus: a prometheus.Collector over a
// retry.Client's per-zone Stats and ClientStats and a budget.Budget's Stats.
// An SDK adds three lines:
//
//	col, err := retryprom.New(retryprom.Config{Client: c, Zones: zones}) // zones: func() []retry.Zone
//	prometheus.MustRegister(col)
//	http.Handle("/metrics", promhttp.Handler())
//
// # Cost
//
// The collector keeps no state the engine writes: it reads the engine's
// lock-free snapshots (Client.Stats, Client.ClientStats) when Prometheus
// scrapes, so Send and RecvResponse do exactly what they do without it, with
// no allocation. Budget.Stats advances the budget's window as TryRetry would
// and grants nothing. Per zone a scrape makes one Stats call and two
// allocations for all 24 series (two more for label values above 99),
// instead of a dozen allocations per series with
// prometheus.MustNewConstMetric; BENCHMARKS.md gives the measured figures.
//
// # Metrics
//
// Names follow Prometheus conventions: the readretry_ prefix, counters end in
// _total, counts are plain numbers (the base unit of a count). Per-zone
// metrics carry the labels app_id and zone_id (decimal), the zone's
// (AppID, ZoneID). Config.ConstLabels are added to every metric.
//
// Per zone, from retry.Stats:
//
//	readretry_reads_sent_total                counter  ReadsSent (R17)
//	readretry_writes_sent_total               counter  WritesSent (R3, R17)
//	readretry_reads_without_context_total     counter  ReadsWithoutContext (R2, R3)
//	readretry_contexts                        gauge    Contexts (R2)
//	readretry_contexts_peak                   gauge    PeakContexts (R2)
//	readretry_context_cap_hits_total          counter  CapHits (R2)
//	readretry_retries_total{reason}           counter  RetriesTimeout (reason="timeout", R6, R10),
//	                                                   RetriesErrorCode (reason="error_code", R8)
//	readretry_retries_no_proxy_total          counter  RetriesNoProxy (R13)
//	readretry_retries_refused_total           counter  RetriesRefused (R19)
//	readretry_exhausted_total                 counter  Exhausted (R8, R8b, R9)
//	readretry_records_failed_total            counter  RecordsFailed (R8b, R17)
//	readretry_duplicates_dropped_total        counter  DuplicatesDropped (R7, R12, F4)
//	readretry_unknown_seq_packets_total       counter  UnknownSeq (F3)
//	readretry_stray_packets_total             counter  StrayPackets (F5)
//	readretry_malformed_packets_total         counter  MalformedPackets (F1)
//	readretry_records_resent_total            counter  RecordsResent (R11)
//	readretry_wait_timeouts_total             counter  WaitTimeouts (R3)
//	readretry_responses_delivered_total       counter  Delivered (R12)
//	readretry_final_results_total             counter  FinalResults (R12)
//	readretry_do_abandoned_total              counter  DoAbandoned (R20)
//	readretry_abandoned_responses_total       counter  AbandonedResponses (R20)
//	readretry_send_failures_total             counter  SendFailures (R13)
//	readretry_probes_total                    counter  Probes (R13 round 3)
//
// Per client, from retry.ClientStats:
//
//	readretry_unknown_zone_frames_total       counter  UnknownZoneFrames (R17)
//	readretry_malformed_frames_total          counter  MalformedFrames (R17, F1)
//	readretry_suspect_proxies                 gauge    SuspectProxies (R13 round 3)
//	readretry_proxy_suspect_marks_total       counter  SuspectMarks (R13 round 3)
//
// Per budget, from budget.Stats (SPEC B4):
//
//	readretry_budget_requests_total           counter  Requests
//	readretry_budget_retries_granted_total    counter  Retries (cancelled ones included)
//	readretry_budget_retries_cancelled_total  counter  Cancelled
//	readretry_budget_retries_denied_total     counter  Denied
//	readretry_budget_window_requests          gauge    WindowRequests
//	readretry_budget_window_retries           gauge    WindowRetries
//	readretry_budget_window_allowance         gauge    Allowance (fractional)
//
// Only timeout and error_code are values of readretry_retries_total's reason
// label, because a label's values should add up to something: those two
// partition the re-sends a zone's reads used. A retry with no proxy to take
// it is one of them already (counted in both, so it cannot be a third
// reason), and a refused retry was never sent; each has its own counter.
// Thus sum(readretry_retries_total) is the retries used,
// readretry_retries_total - readretry_retries_no_proxy_total those that
// reached a proxy, and readretry_retries_refused_total what the storm guard
// saved.
//
// A zone the client does not know (not yet routed) is left out of a scrape;
// a zone listed twice is exported once.
package retryprom
