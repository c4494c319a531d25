// Each chain on each node: readable, moving, keeping up, draining its queues.
// With an HA pair every series is read folded over the replicas (lib/replicas.libsonnet):
// a chain's condition holds when the replicas agree on it (the lower of two readings for
// "too high", the higher for "too low"), a node is up when any replica reaches it.
local q = import '../lib/consensus.libsonnet';
local replicas = import '../lib/replicas.libsonnet';
local utils = import '../lib/utils.libsonnet';

// The folded reads the rules below share: `up` (any replica reaches the node), `syncing`
// (either replica read the chain syncing: an exclusion on either's word).
local up(c) = replicas.read(c, 'ledger_node_up', c.ledgerSelector);
local syncing(c) = replicas.read(c, 'ledger_blockchain_syncing', c.ledgerSelector);

// A chain halted (lib/consensus.libsonnet `halted`, the halt's condition without its `for`),
// one line: the per-node stall and queue alerts take `unless` it, the halt's own symptoms.
local halted(c) = q.haltIncident(c, c.ledgerSelector, c.exporterInstanceLabels);

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-blockchain',
        rules: [
          // The node answers /health but not the chain's status. 5m: a chain endpoint that
          // fails once in a while is LedgerNodeScrapeErrors' business.
          {
            alert: 'LedgerBlockchainDown',
            // With an HA pair, no replica reads the chain (the highest ledger_blockchain_up is 0).
            expr: q.onlyExpected($._config, '%s == 0 and on(node) %s == 1' % [replicas.read($._config, 'ledger_blockchain_up', $._config.ledgerSelector), up($._config)]),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A blockchain cannot be read from a ledger node.',
              description: |||
                The exporter cannot read the status of blockchain {{ $labels.blockchain }} on
                ledger node {{ $labels.node }}, although the node itself answers.
              |||,
            },
          },
          // The height has not moved for longer than the chain's own txMaxTimeTrigger plus
          // consensusTimeout plus stallGrace (3m) while work waits: pending
          // transactions or an open vote session (lib/consensus.libsonnet `stalled`). A block
          // is due within txMaxTimeTrigger of a pending transaction and a round ends within
          // consensusTimeout, so a chain with 1m and 30s pages after 4.5m without a block,
          // plus the `for`: within 6 minutes of its last block, one failed round included.
          // Where the node reports neither setting, heightStalled (10m) is the
          // threshold. An idle chain (no pending transaction, no open session) never fires,
          // however long it is quiet: nothing is due, and an info alert on every quiet
          // chain would only teach people to ignore the page (docs/alerts.md's runbook). By the
          // exporter's own last-change timestamp: clears as soon as a new block arrives.
          // `for: 1m` only absorbs evaluation jitter. With --state.file a restart keeps the
          // timestamp; without it the timestamp restarts, delaying (not losing) the alert.
          // With an HA pair, stalled when the replicas agree: the age of the most recent
          // height change any replica saw, the work waiting both saw.
          {
            alert: 'LedgerBlockHeightStalled',
            expr: q.onlyExpected($._config, |||
              %(stalled)s
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
              unless on(%(exporterInstanceLabels)s, blockchain) %(halted)s
            ||| % ($._config {
              stalled: std.rstripChars(q.stalled($._config, $._config.ledgerSelector, $._config.exporterInstanceLabels), '\n'),
              halted: halted($._config),
              up: up($._config),
            })),
            'for': '1m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A blockchain height has not moved while work is waiting.',
              description: |||
                The height of blockchain {{ $labels.blockchain }} on ledger node
                {{ $labels.node }} has not changed for {{ $value | humanizeDuration }}, longer
                than the chain's txMaxTimeTrigger plus consensusTimeout allow, while
                transactions are pending or a vote session is open.
              |||,
            },
          },
          // The chain has halted: a strict majority of the up nodes that read it meet
          // LedgerBlockHeightStalled's condition (lib/consensus.libsonnet `halted`), per
          // exporter (exporterInstanceLabels) and chain, whatever height each stands at. The
          // majority, never the highest node: one node whose height keeps rising (a hostile or
          // broken node) cannot hide a halt of the others, and one node stuck alone (its own
          // LedgerBlockHeightStalled) is no halt. A laggard still climbing neither delays it
          // nor holds it back. Only for a chain the exporter expected (two up nodes or more
          // list it, or the exporter has one up node: lib/consensus.libsonnet `expected`), so
          // chains one node makes up page nothing. One alert names the cause the per-node
          // stall, vote-session, queue, quorum and budget alerts each see a part of;
          // Alertmanager's inhibit_rules (deploy/alertmanager/alertmanager.yml) hold those
          // back while it fires. In this group with the same `for` (1m) as
          // LedgerBlockHeightStalled: the honest nodes of a halted chain stall within a poll
          // of one another, so it fires no later than the first node's stall alert. With an HA
          // pair, one alert for the pair, halted when the replicas agree: each node's stall
          // by the most recent height change any replica saw, each node counted once.
          {
            alert: 'LedgerBlockchainHalted',
            expr: q.onlyExpected($._config, q.halted($._config, $._config.ledgerSelector, $._config.exporterInstanceLabels)),
            'for': '1m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A blockchain has halted: a majority of its nodes do not move while work waits.',
              description: |||
                Blockchain {{ $labels.blockchain }} has halted: {{ $value }} of the up nodes
                polled by {{ $labels.instance }} that read it, a strict majority of them, have
                stalled while work is waiting. The chain itself has stopped, not one node.
              |||,
            },
          },
          // More than blocksBehindThreshold (10) blocks behind the majority's head (the height
          // a strict majority of the up nodes reading the chain reached, so one node reporting
          // an inflated height puts nobody behind) at every sample of the last 5m, then for 5m more: nodes polled a moment apart
          // differ by a block or two while heights move, and that must not flap. A frozen
          // node is LedgerBlockHeightStalled and a syncing one LedgerBlockchainSyncingTooLong,
          // so both are excluded here. The stall guard is LedgerBlockHeightStalled's own
          // condition (lib/consensus.libsonnet `stalled`), so a frozen node never pages as
          // "behind" before it pages as "stalled", and an idle node that others left behind
          // (nothing pending on it: never "stalled") pages here. With an HA pair, behind as
          // both replicas read it (the lower of their 5m minimums).
          {
            alert: 'LedgerNodeBehind',
            expr: q.onlyExpected($._config, |||
              %(behind)s > %(blocksBehindThreshold)d
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
              unless on(%(exporterInstanceLabels)s, node, blockchain) %(syncing)s == 1
              unless on(%(exporterInstanceLabels)s, node, blockchain)
              %(stalled)s
            ||| % ($._config {
              behind: replicas.range($._config, 'min_over_time', 'ledger_blockchain_blocks_behind', $._config.ledgerSelector, '5m', 'min'),
              up: up($._config),
              syncing: syncing($._config),
              stalled: std.rstripChars(q.stalled($._config, $._config.ledgerSelector, $._config.exporterInstanceLabels), '\n'),
            })),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "A ledger node is more than %s behind the majority's head." % utils.plural($._config.blocksBehindThreshold, 'block'),
              description: |||
                Ledger node {{ $labels.node }} has stayed at least {{ $value }} blocks behind the
                majority's head of blockchain {{ $labels.blockchain }} for 10 minutes.
              |||,
            },
          },
          // LedgerNodeBehind in time: blocks come at the chain's pace, so 10 blocks
          // is nothing on a busy chain and hours on a quiet one. ledger_blockchain_behind_seconds
          // is how long ago the majority's head (the height a strict majority of the up nodes
          // reading the chain reached) first reached the block this node still lacks,
          // so it pages on what the node's clients feel: data more than behindTime (5m) old.
          // A node that keeps up reads 0, or under a block interval plus the poll's interval
          // while a block spreads; `for: 5m` lets a lagging node that catches up in a burst
          // clear on its own. The same exclusions as LedgerNodeBehind: a syncing node, and a
          // frozen one (LedgerBlockHeightStalled's business, paged first). With an HA pair,
          // behind as both replicas read it (the lower of their ages).
          {
            alert: 'LedgerNodeBehindTime',
            expr: q.onlyExpected($._config, |||
              %(behindSeconds)s > %(behindTimeSeconds)d
              and on(%(exporterInstanceLabels)s, node) %(up)s == 1
              unless on(%(exporterInstanceLabels)s, node, blockchain) %(syncing)s == 1
              unless on(%(exporterInstanceLabels)s, node, blockchain)
              %(stalled)s
            ||| % ($._config {
              behindSeconds: replicas.read($._config, 'ledger_blockchain_behind_seconds', $._config.ledgerSelector, 'min'),
              up: up($._config),
              syncing: syncing($._config),
              behindTimeSeconds: utils.durationSeconds($._config.behindTime),
              stalled: std.rstripChars(q.stalled($._config, $._config.ledgerSelector, $._config.exporterInstanceLabels), '\n'),
            })),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: "A ledger node is more than %s behind the majority's head in time." % utils.durationText($._config.behindTime),
              description: |||
                Ledger node {{ $labels.node }} lacks a block of blockchain {{ $labels.blockchain }}
                that a majority of its up nodes reached {{ $value | humanizeDuration }} ago.
              |||,
            },
          },
          // The node answered, for a height whose block hash the exporter had read from it,
          // another hash: its history was rewritten (a reorganisation), which a permissioned
          // BFT chain should never do. Any rise pages, within reorgWindow (15m) of it, and the
          // alert resolves once the window holds no rise: one rewrite, one notification.
          // `for: 0m`: a rewritten block is news at once, and the counter never rises by
          // accident (it starts at 0 with the chain's first block read). With an HA pair, any
          // replica's count (the highest increase, folded outside it): a rewrite one replica
          // read is a rewrite, and the pair notifies it once.
          {
            alert: 'LedgerBlockchainReorganized',
            expr: q.onlyExpected($._config, '%s > 0' % replicas.range($._config, 'increase', 'ledger_blockchain_reorgs_total', $._config.ledgerSelector, $._config.reorgWindow)),
            'for': '0m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A ledger node rewrote a block it had already served.',
              description: |||
                Ledger node {{ $labels.node }} answered another hash for a block of blockchain
                {{ $labels.blockchain }} than it had before (a reorganisation) within the last %s.
              ||| % utils.durationText($._config.reorgWindow),
            },
          },
          // Syncing is normal after a restart or for a new node; syncingTooLongFor (30m) is
          // longer than a healthy catch-up should take. Raise it for nodes that replay long
          // chains. With an HA pair, syncing as both replicas read it.
          {
            alert: 'LedgerBlockchainSyncingTooLong',
            expr: q.onlyExpected($._config, '%s == 1 and on(node) %s == 1' % [replicas.read($._config, 'ledger_blockchain_syncing', $._config.ledgerSelector, 'min'), up($._config)]),
            'for': $._config.syncingTooLongFor,
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A ledger node has been syncing a blockchain for more than %s.' % utils.durationText($._config.syncingTooLongFor),
              description: |||
                Ledger node {{ $labels.node }} has been syncing blockchain
                {{ $labels.blockchain }} for more than %s.
              ||| % utils.durationText($._config.syncingTooLongFor),
            },
          },
          // More than pendingMessagesThreshold (1000) queued messages for 10m: the node does
          // not keep up with its input. Short bursts drain within minutes; tune the
          // threshold to your traffic. With an HA pair, the lower count the replicas read.
          {
            alert: 'LedgerPendingMessagesHigh',
            expr: q.onlyExpected($._config, |||
              %(pending)s > %(pendingMessagesThreshold)d
              and on(node) %(up)s == 1
              unless on(%(exporterInstanceLabels)s, blockchain) %(halted)s
            ||| % ($._config {
              pending: replicas.read($._config, 'ledger_blockchain_pending_messages', $._config.ledgerSelector, 'min'),
              up: up($._config),
              halted: halted($._config),
            })),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Pending messages pile up on a ledger node.',
              description: |||
                {{ $value }} messages are pending on ledger node {{ $labels.node }} for
                blockchain {{ $labels.blockchain }}, above %(pendingMessagesThreshold)d for 10 minutes.
              ||| % $._config,
            },
          },
          // More than delayedMessagesThreshold (100) delayed messages for 10m. Delayed
          // messages wait for something (a block, a vote); a growing backlog means that
          // something does not come. With an HA pair, the lower count the replicas read.
          {
            alert: 'LedgerDelayedMessagesHigh',
            expr: q.onlyExpected($._config, |||
              %(delayed)s > %(delayedMessagesThreshold)d
              and on(node) %(up)s == 1
              unless on(%(exporterInstanceLabels)s, blockchain) %(halted)s
            ||| % ($._config {
              delayed: replicas.read($._config, 'ledger_blockchain_delayed_messages', $._config.ledgerSelector, 'min'),
              up: up($._config),
              halted: halted($._config),
            })),
            'for': '10m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Delayed messages pile up on a ledger node.',
              description: |||
                {{ $value }} messages are delayed on ledger node {{ $labels.node }} for
                blockchain {{ $labels.blockchain }}, above %(delayedMessagesThreshold)d for 10 minutes.
              ||| % $._config,
            },
          },
        ],
      },
    ],
  },
}
