// Ledger / Exporter: the exporter's own health.
local g = import '../lib/grafana.libsonnet';
local r = import '../lib/replicas.libsonnet';

{
  grafanaDashboards+:: {
    'ledger-exporter.json':
      local c = $._config;
      local pick = 'job=~"$job", instance=~"$instance"';
      // The exporter's own series, and the node series it serves in daemon mode.
      local E = '%s, %s' % [c.exporterSelector, pick];
      local L = '%s, %s' % [c.ledgerSelector, pick];
      local N = L + ', node=~"$node"';
      // The exporter's own panels (targets, cycle, config, build, process) stay per replica
      // of an HA pair, each line named by its instance and replica (`who`: the replica is
      // empty on a single exporter); the node panels fold the replicas (lib/replicas.libsonnet),
      // one line per node.
      local who = std.join(' ', ['{{instance}}'] + ['{{%s}}' % l for l in r.labels(c)]);
      local f(metric, s) = r.read(c, metric, s);
      g.dashboard(
        c,
        'ledger-exporter',
        'Exporter',
        'Health of ledger-exporter itself: polling cycle, per-node poll duration and errors, config reloads, process resources.',
        [
          g.queryVariable('job', 'Job', 'ledger_exporter_build_info{%s}' % c.exporterSelector),
          g.queryVariable('instance', 'Instance', 'ledger_exporter_build_info{%s, job=~"$job"}' % c.exporterSelector),
          g.queryVariable('node', 'Node', 'ledger_node_up{%s}' % L),
        ],
        [
          g.row(1, 'Exporter'),
          g.stat(
            2,
            'Exporter targets up',
            "Whether Prometheus scraped each exporter target in its last scrape: one per exporter, one per replica of an HA pair (where one replica down while its twin is up leaves every node watched).",
            [g.target('up{%s}' % E, who)],
            steps=g.thresholds('red', [[1, 'green']]),
            mappings=g.boolMapping(['down', 'red'], ['up', 'green']),
          ),
          g.stat(
            3,
            'Config reload',
            'Whether the last configuration (re)load succeeded; a failed reload keeps the old config.',
            [g.target('ledger_exporter_config_last_reload_successful{%s}' % E, who)],
            steps=g.thresholds('red', [[1, 'green']]),
            mappings=g.boolMapping(['failed', 'red'], ['ok', 'green']),
          ),
          g.table(
            4,
            'Exporter version',
            'ledger_exporter_build_info per exporter instance (and replica of an HA pair): version, the git revision and branch the build recorded (empty when it recorded none), and the Python version it runs on.',
            [g.tableTarget('ledger_exporter_build_info{%s}' % E)],
            ['instance'] + r.labels(c) + ['job', 'version', 'revision', 'branch', 'python_version'],
            size=[6, 4],
          ),
          g.stat(
            5,
            'Uptime',
            'Time since the exporter process started.',
            [g.target('time() - process_start_time_seconds{%s}' % E, who)],
            unit='dtdurations',
          ),
          g.timeseries(
            6,
            'Polling cycle duration',
            "Wall time of the exporter's last full polling cycle, and its deadline (the config's scrape_timeout): a cycle near the deadline is about to cut slow nodes off (LedgerExporterCycleNearTimeout).",
            [
              g.target('ledger_exporter_cycle_duration_seconds{%s}' % E, who),
              g.target('ledger_exporter_cycle_timeout_seconds{%s}' % E, who + ' timeout'),
            ],
            unit='s',
          ),
          g.timeseries(
            7,
            'Prometheus scrape duration',
            'How long Prometheus takes to scrape /metrics (scrape_duration_seconds).',
            [g.target('scrape_duration_seconds{%s}' % E, who)],
            unit='s',
          ),
          g.row(8, 'Nodes'),
          g.timeseries(
            9,
            'Node poll duration',
            "Wall time of each node's last poll (the slower replica's, in an HA pair).",
            [g.target(f('ledger_node_scrape_duration_seconds', N), '{{node}}')],
            unit='s',
          ),
          g.timeseries(
            10,
            'Scrape errors by reason',
            'Failed requests per second to the nodes, by endpoint and reason (the replica with more, in an HA pair).',
            [g.target('sum by (node, endpoint, reason) (%s)' % r.range(c, 'rate', 'ledger_node_scrape_errors_total', N, '$__rate_interval'), '{{node}} {{endpoint}} {{reason}}')],
            unit='reqps',
          ),
          g.timeseries(
            11,
            'Time since last successful poll',
            "Age of each node's last successful /health read (by either replica, in an HA pair).",
            [g.target('time() - %s' % f('ledger_node_last_success_timestamp_seconds', N), '{{node}}')],
            unit='s',
          ),
          g.stateTimeline(
            12,
            'Node up',
            "1 when the exporter (either replica, in an HA pair) read the node's /health in that cycle.",
            [g.target(f('ledger_node_up', N), '{{node}}')],
            g.boolMapping(['down', 'red'], ['up', 'green']),
          ),
          g.timeseries(
            17,
            'Values dropped for a bound',
            'Values per second the nodes sent beyond a configured bound and so not exported, by kind: blockchain (max_blockchains_per_node), feature (max_features_per_chain), auth_group (max_auth_groups_per_wallet), label_value (max_label_value_length). 0 on a healthy network; above it a node sends more than the bound allows; raise the setting or fix the node (the log names it).',
            [g.target('sum by (node, kind) (%s)' % r.range(c, 'rate', 'ledger_exporter_dropped_values_total', E + ', node=~"$node"', '$__rate_interval'), '{{node}} {{kind}}')],
            unit='cps',
            size=[24, 8],
          ),
          g.row(13, 'Process'),
          g.timeseries(
            14,
            'CPU',
            'CPU time used by the exporter process (1 = one core).',
            [g.target('rate(process_cpu_seconds_total{%s}[$__rate_interval])' % E, who)],
            unit='percentunit',
            size=[8, 8],
          ),
          g.timeseries(
            15,
            'Memory',
            'Resident and virtual memory of the exporter process.',
            [
              g.target('process_resident_memory_bytes{%s}' % E, who + ' resident'),
              g.target('process_virtual_memory_bytes{%s}' % E, who + ' virtual'),
            ],
            unit='bytes',
            size=[8, 8],
          ),
          g.timeseries(
            16,
            'Open file descriptors',
            'Open file descriptors against the process limit.',
            [
              g.target('process_open_fds{%s}' % E, who + ' open'),
              g.target('process_max_fds{%s}' % E, who + ' limit'),
            ],
            size=[8, 8],
          ),
          g.row(18, 'Configuration'),
          g.stat(
            19,
            'Config in force for',
            'Time since the configuration last loaded successfully, at start or by a reload (SIGHUP, POST /-/reload); a failed reload does not reset it (see Config reload above).',
            [g.target('time() - ledger_exporter_config_last_reload_success_timestamp_seconds{%s}' % E, who)],
            unit='dtdurations',
            size=[12, 4],
          ),
          g.stat(
            20,
            'State file write failures',
            "Writes of the state file (--state.file) that failed in the last hour (LedgerExporterStateFileWriteFailing): above 0, the memory between cycles will not survive a restart; the exporter's log names the file and the error. No data without --state.file.",
            [g.target('increase(ledger_exporter_state_file_write_failures_total{%s}[1h])' % E, who)],
            unit='short',
            size=[12, 4],
          ),
        ],
      ),
  },
}
