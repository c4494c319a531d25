// Contracts and wallets named in the exporter's `watch` list (docs/network-and-consensus.md, "Watch lists").
//
// With an HA pair every series is read folded over the replicas (lib/replicas.libsonnet), so
// each node's reading counts once: a status or a disabled wallet as both replicas read it,
// a changed version or code hash as either did.
local replicas = import '../lib/replicas.libsonnet';
local utils = import '../lib/utils.libsonnet';
local read(c, metric, how='max', extra='') = replicas.read(c, metric, c.ledgerSelector + extra, how);

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-watch',
        rules: [
          // A watched contract reports a status other than ACTIVE (PAUSED, UPGRADED or one
          // the interface does not name). A warning: pausing is often deliberate, but whoever
          // runs on the contract must know. 2m rides out a single odd answer.
          {
            alert: 'LedgerWatchedContractNotActive',
            expr: '%s == 1 and on(node) %s == 1' % [read($._config, 'ledger_contract_status', 'min', ', status!="ACTIVE"'), read($._config, 'ledger_node_up')],
            'for': '2m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A watched contract is not ACTIVE.',
              description: |||
                Ledger node {{ $labels.node }} reports contract {{ $labels.contract }} on
                blockchain {{ $labels.blockchain }} as {{ $labels.status }}, not ACTIVE.
              |||,
            },
          },
          // A watched contract's version moved, or a node reported another code hash (or VM
          // type or address), within contractChangedWindow (15m): an upgrade happened. Info
          // only; it clears by itself that long after the change. `for: 1m` needs two
          // evaluations that saw the change.
          {
            alert: 'LedgerWatchedContractChanged',
            expr: |||
              max by (job, instance, blockchain, contract) (changes(ledger_contract_version{%(ledgerSelector)s}[%(contractChangedWindow)s])) > 0
              or
              max by (job, instance, blockchain, contract) (
                count by (job, instance, node, blockchain, contract) (
                  %(info)s
                )
              ) > 1
            ||| % ($._config {
              info: replicas.range($._config, 'last_over_time', 'ledger_contract_info', $._config.ledgerSelector, $._config.contractChangedWindow),
            }),
            'for': '1m',
            labels: { severity: 'info' },
            annotations: {
              summary: 'A watched contract changed its code hash or version.',
              description: |||
                Contract {{ $labels.contract }} on blockchain {{ $labels.blockchain }} changed its
                version or code hash in the last %s; check that the upgrade was planned.
              ||| % utils.durationText($._config.contractChangedWindow),
            },
          },
          // A watched wallet reports enabled: false. 2m rides out a single odd answer.
          {
            alert: 'LedgerWatchedWalletDisabled',
            expr: '%s == 0 and on(node) %s == 1' % [read($._config, 'ledger_wallet_enabled'), read($._config, 'ledger_node_up')],
            'for': '2m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'A watched wallet is disabled.',
              description: |||
                Ledger node {{ $labels.node }} reports wallet {{ $labels.wallet }} on blockchain
                {{ $labels.blockchain }} as disabled.
              |||,
            },
          },
          // The up nodes that read a watched contract report different statuses, code hashes
          // or versions. 5m: nodes polled a moment apart can straddle an upgrade for a cycle
          // or two, and a rolling upgrade takes a few minutes. Nodes that cannot read it are
          // left out.
          {
            alert: 'LedgerWatchedContractNodesDisagree',
            expr: |||
              count by (job, instance, blockchain, contract) (
                count by (job, instance, blockchain, contract, status) (%(status)s == 1)
              ) > 1
              or
              count by (job, instance, blockchain, contract) (
                count by (job, instance, blockchain, contract, code_hash) (%(info)s)
              ) > 1
              or
              max by (job, instance, blockchain, contract) (%(version)s)
                != min by (job, instance, blockchain, contract) (%(version)s)
            ||| % ($._config {
              status: read($._config, 'ledger_contract_status', 'min'),
              info: read($._config, 'ledger_contract_info'),
              version: read($._config, 'ledger_contract_version'),
            }),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Ledger nodes disagree on a watched contract.',
              description: |||
                The polled nodes report different statuses, code hashes or versions for contract
                {{ $labels.contract }} on blockchain {{ $labels.blockchain }}; compare
                ledger_contract_status and ledger_contract_info per node.
              |||,
            },
          },
          // The up nodes that read a watched wallet report a different enabled flag or
          // permission. 5m, as for contracts.
          {
            alert: 'LedgerWatchedWalletNodesDisagree',
            expr: |||
              max by (job, instance, blockchain, wallet) (%(enabled)s)
                != min by (job, instance, blockchain, wallet) (%(enabled)s)
              or
              max by (job, instance, blockchain, wallet, group, permission) (%(permission)s)
                != min by (job, instance, blockchain, wallet, group, permission) (%(permission)s)
            ||| % ($._config {
              enabled: read($._config, 'ledger_wallet_enabled'),
              permission: read($._config, 'ledger_wallet_permission'),
            }),
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Ledger nodes disagree on a watched wallet.',
              description: |||
                The polled nodes report a different enabled flag or permission for wallet
                {{ $labels.wallet }} on blockchain {{ $labels.blockchain }}; compare
                ledger_wallet_enabled and ledger_wallet_permission per node.
              |||,
            },
          },
        ],
      },
    ],
  },
}
