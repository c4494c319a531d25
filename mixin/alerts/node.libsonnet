// Each polled node: readable, answering, connected.
local replicas = import '../lib/replicas.libsonnet';
local utils = import '../lib/utils.libsonnet';
// '14d' -> '14 days' (else as utils.durationText says it): the certificate thresholds.
local daysText(duration) =
  local seconds = utils.durationSeconds(duration);
  if seconds % 86400 == 0 then utils.plural(seconds / 86400, 'day') else utils.secondsText(seconds);

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-node',
        rules: [
          // The node's /health could not be read or parsed. 2m = about 8 polls at the
          // exporter's default 15s interval, so one slow answer or a quick restart does not
          // page. With an HA pair, down when NO replica reaches the node (the highest
          // ledger_node_up of the replicas is 0): a replica that alone cannot reach it is
          // LedgerExporterReplicaNodeUnreachable, a warning about that replica.
          {
            alert: 'LedgerNodeDown',
            expr: '%s == 0' % replicas.read($._config, 'ledger_node_up', $._config.ledgerSelector),
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A ledger node is down.',
              description: |||
                The exporter {{ $labels.instance }} cannot read /health of ledger node
                {{ $labels.node }}; its blockchains are not monitored while it is down.
              |||,
            },
          },
          // Another node answers at a configured node's URL (its /health reports another
          // nodeId than the config's `expect` pins, or lacks an expected chain): a DNS or
          // load-balancer mistake, a restored snapshot or an impostor. The exporter already
          // keeps none of its readings; this pages because every answer of it is untrusted.
          // A 5m window of the counter, not ledger_node_up: a balancer that alternates
          // between the right and the wrong node keeps it firing, and one exporter cycle's
          // count is enough. 1m: one Prometheus evaluation more than a transient answer.
          // With an HA pair, any replica's count (the highest increase): an impostor answering
          // one replica is as untrusted as one answering both.
          {
            alert: 'LedgerNodeIdentityMismatch',
            expr: |||
              %s > 0
            ||| % replicas.range($._config, 'increase', 'ledger_node_scrape_errors_total', $._config.ledgerSelector + ', endpoint="health", reason="identity_mismatch"', '5m'),
            'for': '1m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'Another node answers at a ledger node\'s URL.',
              description: |||
                Within the last 5 minutes the /health of ledger node {{ $labels.node }}
                answered as another node than the exporter's config expects (its nodeId or
                blockchains); the exporter {{ $labels.instance }} counts it down and keeps
                none of its readings. Its log names the nodeId expected and seen.
              |||,
            },
          },
          // At least scrapeErrorsThreshold (3) failed requests in every 5m window (one poll
          // in 20 at the default 15s interval) for 15m: a node or endpoint failing now and
          // then. A node down for the whole last 10m is left to LedgerNodeDown; the 10m
          // window expires before the 15m `for`, so a plain outage never raises both.
          // With an HA pair, the failures both replicas counted (the lower increase): a
          // replica whose own path to the node fails is its own warning
          // (LedgerExporterReplicaNodeUnreachable), not the node's.
          {
            alert: 'LedgerNodeScrapeErrors',
            expr: |||
              %(errors)s >= %(scrapeErrorsThreshold)d
              unless on(node) (%(upWindow)s == 0)
            ||| % ($._config {
              errors: replicas.range($._config, 'increase', 'ledger_node_scrape_errors_total', $._config.ledgerSelector, '5m', 'min'),
              upWindow: replicas.range($._config, 'max_over_time', 'ledger_node_up', $._config.ledgerSelector, '10m'),
            }),
            'for': '15m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Requests to a ledger node keep failing.',
              description: |||
                {{ $value | humanize }} requests to the {{ $labels.endpoint }} endpoint of ledger
                node {{ $labels.node }} failed with reason {{ $labels.reason }} in the last 5
                minutes, for at least 15 minutes.
              |||,
            },
          },
          // The node answers zero peers: it is cut off from the network. 2m rides out a peer
          // reconnect. Drop this alert for a single-node network, which never has peers.
          // With an HA pair, the replicas agree: the highest count either read is 0.
          {
            alert: 'LedgerNodePeersLost',
            expr: '%(peers)s == 0 and on(node) %(up)s == 1' % ($._config {
              peers: replicas.read($._config, 'ledger_node_peers', $._config.ledgerSelector),
              up: replicas.read($._config, 'ledger_node_up', $._config.ledgerSelector),
            }),
            'for': '2m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A ledger node has no peers.',
              description: |||
                Ledger node {{ $labels.node }} reports 0 connected peers; it cannot receive or
                propagate blocks and votes.
              |||,
            },
          },
          // Fewer than peersLowThreshold (2) peers, but more than 0 (LedgerNodePeersLost),
          // for 10m. With 2, one node down in a 4-node network (3 -> 2 peers on the others)
          // does not fire on every other node; raise it for larger networks. With an HA
          // pair, the highest count either replica read.
          {
            alert: 'LedgerNodePeersLow',
            expr: |||
              %(peers)s < %(peersLowThreshold)d and %(peers)s > 0
              and on(node) %(up)s == 1
            ||| % ($._config {
              peers: replicas.read($._config, 'ledger_node_peers', $._config.ledgerSelector),
              up: replicas.read($._config, 'ledger_node_up', $._config.ledgerSelector),
            }),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A ledger node has fewer than %s.' % utils.plural($._config.peersLowThreshold, 'peer'),
              description: |||
                Ledger node {{ $labels.node }} has only {{ $value }} connected peer(s) for 10
                minutes; losing one more isolates it.
              |||,
            },
          },
          // The earliest notAfter of the chain the node presented at its last TLS handshake
          // is under certExpiryCritical (3d) away: renew now, clients refuse it once it
          // passes (and the exporter reads the node as down, reason certificate). 10m: the
          // value only changes at a handshake, so a short `for` is enough to skip one stale
          // answer of a load balancer's old backend. With an HA pair, the later expiry
          // either replica saw (one that saw the renewed certificate is right).
          {
            alert: 'LedgerNodeCertificateExpiring',
            expr: |||
              %(expiry)s - time() < %(critical)d
            ||| % ($._config {
              expiry: replicas.read($._config, 'ledger_node_tls_cert_expiry_timestamp_seconds', $._config.ledgerSelector),
              critical: utils.durationSeconds($._config.certExpiryCritical),
            }),
            'for': '10m',
            labels: { severity: 'critical' },
            annotations: {
              summary: "A ledger node's TLS certificate expires soon.",
              description: |||
                The certificate chain ledger node {{ $labels.node }} presents expires in
                {{ $value | humanizeDuration }} (under %s); renew it before its clients refuse it.
              ||| % daysText($._config.certExpiryCritical),
            },
          },
          // The same under certExpiryWarning (14d), above certExpiryCritical: two weeks leave
          // time to renew through the usual change process. One severity at a time, so a
          // certificate crossing 3 days pages once as critical, not twice.
          {
            alert: 'LedgerNodeCertificateExpiring',
            expr: |||
              %(expiry)s - time() < %(warning)d
              and %(expiry)s - time() >= %(critical)d
            ||| % ($._config {
                     expiry: replicas.read($._config, 'ledger_node_tls_cert_expiry_timestamp_seconds', $._config.ledgerSelector),
                     warning: utils.durationSeconds($._config.certExpiryWarning),
                     critical: utils.durationSeconds($._config.certExpiryCritical),
                   }),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "A ledger node's TLS certificate expires soon.",
              description: |||
                The certificate chain ledger node {{ $labels.node }} presents expires in
                {{ $value | humanizeDuration }} (under %s); renew it.
              ||| % daysText($._config.certExpiryWarning),
            },
          },
        ],
      },
    ],
  },
}
