// The exporter itself: scraped, present, and running on the config it was given.
//
// An HA pair (two replicas, one logical exporter: _config.replicaLabels) pages only when
// neither replica is scraped (LedgerExporterDown, folded); one replica lost is a ticket
// (LedgerExporterReplicaDown). The alerts about an exporter process itself (its reloads,
// certificate, cycles, state file, dropped values) stay per replica: they carry the replica
// label, and are marked `perReplica` (mixin.perReplicaAlerts lists them for Alertmanager's
// inhibition of a lost replica and for the two-replica tests).
local replicas = import '../lib/replicas.libsonnet';
local utils = import '../lib/utils.libsonnet';
// The exporter's identity with the replica labels: a per-replica `by`.
local perReplicaBy(c) = std.join(', ', std.filter(function(l) l != '', [c.exporterInstanceLabels, replicas.list(c)]));

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-exporter',
        rules: [
          // Prometheus could not scrape the exporter. 2m = 8 failed scrapes at the 15s
          // interval: rides out one exporter restart. With an HA pair, only when no replica
          // is up (the highest `up` of the replicas is 0): then no node is watched. One
          // replica down while its twin is up is LedgerExporterReplicaDown, a ticket.
          {
            alert: 'LedgerExporterDown',
            expr: '%s == 0' % replicas.read($._config, 'up', $._config.exporterSelector),
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'The ledger exporter cannot be scraped.',
              description: |||
                Prometheus cannot scrape the ledger exporter {{ $labels.instance }} (job
                {{ $labels.job }}). The ledger nodes it polls are unmonitored and no other
                Ledger alert can fire for them.
              |||,
            },
          },
          // Prometheus has no target at all for the exporter's job (service discovery lost
          // it or the scrape config changed), so LedgerExporterDown cannot fire either.
          // Same 2m. Only once this rule group has been evaluated for a minute (the
          // LedgerWatchdog below fires at every evaluation, so its ALERTS samples a minute
          // back say so): before a fresh Prometheus's first scrape no `up` exists at all, and
          // a bare absent() would go pending at every start. A range has no lookback, so a
          // restart after a downtime waits its minute too.
          {
            alert: 'LedgerExporterAbsent',
            expr: |||
              absent(up{%(exporterSelector)s})
              and on() count_over_time(ALERTS{alertname="LedgerWatchdog"}[1m] offset 1m)
            ||| % $._config,
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Prometheus has no ledger exporter target.',
              description: |||
                No target matching `%(exporterSelector)s` exists in Prometheus{{ if $labels.job }}
                (job {{ $labels.job }}){{ end }}: no ledger node is monitored. Check the scrape
                configuration and service discovery.
              ||| % $._config,
            },
          },
          // One replica of an HA pair cannot be scraped while its twin is up: every node is
          // still watched (by the twin), but the pair no longer survives another loss. A
          // warning (ticket), labelled with the replica; the same 2m as LedgerExporterDown. It
          // holds back the lost replica's own alerts (Alertmanager), never the pair's. Never
          // fires on a single exporter (its own `up` is the highest).
          {
            alert: 'LedgerExporterReplicaDown',
            expr: |||
              up{%(exporterSelector)s} == 0
              and ignoring(%(replicas)s) %(up)s == 1
            ||| % ($._config {
              replicas: replicas.list($._config),
              up: replicas.read($._config, 'up', $._config.exporterSelector),
            }),
            'for': '2m',
            labels: { severity: 'warning' },
            perReplica:: true,
            annotations: {
              summary: 'One replica of the ledger exporter pair cannot be scraped; its twin still watches the nodes.',
              description: |||
                Prometheus cannot scrape replica {{ $labels.exporter_replica }} of the ledger
                exporter {{ $labels.instance }} (job {{ $labels.job }}), while another replica
                is up and polls the nodes. Nothing is unmonitored, but losing the other replica
                too leaves every node unwatched: bring this one back.
              |||,
            },
          },
          // One replica of an HA pair cannot read /health of a node that its twin reads: the
          // replica's own network path (DNS, a firewall, a network policy, its credentials),
          // not the node. A warning about the replica, labelled with it and the node, never
          // the node's page: LedgerNodeDown needs every replica to lose the node. 2m, as
          // LedgerNodeDown: the replicas poll a moment apart, so a node that goes down reads
          // 0 on one replica a poll before the other, for well under that. Never fires on a
          // single exporter.
          {
            alert: 'LedgerExporterReplicaNodeUnreachable',
            expr: |||
              ledger_node_up{%(ledgerSelector)s} == 0
              and ignoring(%(replicas)s) %(up)s == 1
            ||| % ($._config {
              replicas: replicas.list($._config),
              up: replicas.read($._config, 'ledger_node_up', $._config.ledgerSelector),
            }),
            'for': '2m',
            labels: { severity: 'warning' },
            perReplica:: true,
            annotations: {
              summary: 'One replica of the ledger exporter pair cannot reach a node that its twin reaches.',
              description: |||
                Replica {{ $labels.exporter_replica }} of the ledger exporter {{ $labels.instance }}
                cannot read /health of ledger node {{ $labels.node }}, which another replica
                reads: the node is up, this replica's path to it fails. Its log names the
                error.
              |||,
            },
          },
          // The exporter refused a changed config file and keeps polling with the old one.
          // 5m leaves time to fix a typo and reload again before anyone is told.
          {
            alert: 'LedgerExporterConfigReloadFailed',
            expr: 'ledger_exporter_config_last_reload_successful{%(exporterSelector)s} == 0' % $._config,
            'for': '5m',
            labels: { severity: 'warning' },
            perReplica:: true,
            annotations: {
              summary: 'The ledger exporter failed to reload its configuration.',
              description: |||
                The last configuration reload of the ledger exporter {{ $labels.instance }}
                failed; it keeps using the previous configuration. Run
                `ledger-exporter --config.check` on the file to see what to fix.
              |||,
            },
          },
          // The certificate the exporter serves its own endpoints with (web config's
          // cert_file) expires within certExpiryWarning (14d, as for the nodes' own): once it
          // passes Prometheus refuses the handshake and every Ledger alert goes blind. A
          // renewed certificate is served within --config.auto-reload-interval, so this
          // fires only when the renewal did not happen or its files were refused. Warning:
          // two weeks leave time; LedgerExporterDown pages if it does expire. 10m: the value
          // only changes at a reload.
          {
            alert: 'LedgerExporterCertificateExpiring',
            expr: |||
              ledger_exporter_tls_cert_expiry_timestamp_seconds{%(exporterSelector)s} - time() < %(warning)d
            ||| % ($._config { warning: utils.durationSeconds($._config.certExpiryWarning) }),
            'for': '10m',
            labels: { severity: 'warning' },
            perReplica:: true,
            annotations: {
              summary: "The ledger exporter's own TLS certificate expires soon.",
              description: |||
                The certificate the ledger exporter {{ $labels.instance }} serves its endpoints
                with expires in {{ $value | humanizeDuration }}; renew its cert_file and
                key_file (a renewed pair is served without a restart).
              |||,
            },
          },
          // The polling cycles take nearly all of their deadline: every cycle of the last
          // 10m took more than cycleNearTimeoutRatio (0.8) of scrape_timeout (the exporter's
          // ledger_exporter_cycle_timeout_seconds). Nodes that answer that slowly are about
          // to be cut off at the deadline and read with what they sent by then. The
          // minimum over 10m ignores one slow cycle; 5m more makes it a trend, not a burst.
          {
            alert: 'LedgerExporterCycleNearTimeout',
            expr: |||
              min_over_time(ledger_exporter_cycle_duration_seconds{%(exporterSelector)s}[10m])
              > %(cycleNearTimeoutRatio)s * ledger_exporter_cycle_timeout_seconds{%(exporterSelector)s}
            ||| % $._config,
            'for': '5m',
            labels: { severity: 'warning' },
            perReplica:: true,
            annotations: {
              summary: 'The ledger exporter polling cycles come close to their timeout.',
              description: |||
                Every polling cycle of the ledger exporter {{ $labels.instance }} in the last 10
                minutes took {{ $value | humanizeDuration }} or more, over %(percent)s of its
                scrape_timeout: nodes answer so slowly that they are about to be cut off.
              ||| % ($._config { percent: '%d%%' % std.round(100 * $._config.cycleNearTimeoutRatio) }),
            },
          },
          // A node sent more than a configured bound (the max_* keys) and the excess was not
          // exported, every 5m window for 15m: the bound keeps being hit, so series are
          // missing until it is raised or the node fixed. One drop in passing (a listing gone
          // wrong for a cycle) clears before the `for`.
          {
            alert: 'LedgerExporterValuesDropped',
            expr: 'increase(ledger_exporter_dropped_values_total{%(exporterSelector)s}[5m]) > 0' % $._config,
            'for': '15m',
            labels: { severity: 'warning' },
            perReplica:: true,
            annotations: {
              summary: 'The ledger exporter drops values beyond a configured bound.',
              description: |||
                The ledger exporter {{ $labels.instance }} keeps dropping {{ $labels.kind }}
                values that node {{ $labels.node }} sends beyond its configured bound
                ({{ $value | humanize }} in the last 5 minutes); their series are missing.
              |||,
            },
          },
          // Writing the state file (--state.file) failed in every 5m window for 10m: the
          // memory between cycles (the heights' last-change times) will not survive a
          // restart. A write happens each cycle the memory changed, so a failure that lasts
          // is counted every cycle; one failed write (a full disk freed at once) clears.
          {
            alert: 'LedgerExporterStateFileWriteFailing',
            expr: 'increase(ledger_exporter_state_file_write_failures_total{%(exporterSelector)s}[5m]) > 0' % $._config,
            'for': '10m',
            labels: { severity: 'warning' },
            perReplica:: true,
            annotations: {
              summary: 'The ledger exporter cannot write its state file.',
              description: |||
                The ledger exporter {{ $labels.instance }} failed to write its state file
                {{ $value | humanize }} times in the last 5 minutes; its memory between cycles
                will not survive a restart. Its log names the file and the error.
              |||,
            },
          },
          // A polling cycle caught a failure it did not expect (a node's results, the
          // network view, a maintenance entry, or the whole cycle: a bug, or a value the
          // config checks let through), or no cycle has ended for longer than the exporter's
          // own stale bound (ledger_exporter_stale_after_seconds: 3 scrape_interval plus one
          // scrape_timeout), so /metrics serves no node series and /-/ready fails. One
          // caught failure is reason to look: it keeps the alert up for the 5m window; 2m
          // lets a bound crossed by one slow render pass before anyone is told.
          {
            alert: 'LedgerExporterCycleFailing',
            expr: |||
              sum by (%(by)s) (increase(ledger_exporter_cycle_failures_total{%(exporterSelector)s}[5m])) > 0
              or max by (%(by)s) (
                time() - ledger_exporter_last_successful_cycle_timestamp_seconds{%(exporterSelector)s}
                > ledger_exporter_stale_after_seconds{%(exporterSelector)s}
              )
            ||| % ($._config { by: perReplicaBy($._config) }),
            'for': '2m',
            labels: { severity: 'warning' },
            perReplica:: true,
            annotations: {
              summary: 'The ledger exporter polling cycles fail.',
              description: |||
                The ledger exporter {{ $labels.instance }} caught failures inside its polling
                cycles in the last 5 minutes, or none of its cycles has ended within its stale
                bound: part of what it exports is left out or stale. Its log names the stage
                and the error.
              |||,
            },
          },
          // Always firing, by design: the dead man's switch of the alerting pipeline
          // (kube-prometheus's Watchdog). Route it to a service that pages when it stops
          // arriving (deploy/alertmanager/alertmanager.yml sends it to its own receiver).
          // `for: 0s`: it must fire from Prometheus's first evaluation, never sit pending.
          {
            alert: 'LedgerWatchdog',
            expr: 'vector(1)',
            'for': '0s',
            labels: { severity: 'none' },
            annotations: {
              summary: 'The alerting pipeline works: this alert always fires.',
              description: |||
                This alert always fires, to prove that Prometheus evaluates the ledger rules
                and Alertmanager delivers them; a dead man's switch pages when it stops
                arriving.
              |||,
            },
          },
        ],
      },
    ],
  },
}
