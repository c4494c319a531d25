// Consensus as one node sees it: enough council members, votes that conclude.
{
  prometheusAlerts+:: {
    groups+: [
      {
        name: 'ledger-consensus',
        rules: [
          // The node sees fewer council members than the chain's consensus needs: no block
          // can be agreed on. 5m rides out a member rejoining after a restart.
          {
            alert: 'LedgerCouncilBelowMinMembers',
            expr: |||
              ledger_blockchain_council_members{%(ledgerSelector)s} < ledger_blockchain_consensus_min_members{%(ledgerSelector)s}
              and on(node) ledger_node_up{%(ledgerSelector)s} == 1
            ||| % $._config,
            'for': '5m',
            labels: { severity: 'critical' },
            annotations: {
              summary: 'A blockchain council is below its consensus minimum.',
              description: |||
                Ledger node {{ $labels.node }} sees {{ $value }} council members on blockchain
                {{ $labels.blockchain }}, fewer than consensus.minMembers; consensus cannot be
                reached.
              |||,
            },
          },
          // A vote session past round voteRoundThreshold (3) for 5m: every round is a failed
          // attempt (a leader timed out or votes were missing), so rounds that keep climbing
          // mean consensus struggles.
          {
            alert: 'LedgerVoteRoundsEscalating',
            expr: 'ledger_blockchain_vote_round{%(ledgerSelector)s} > %(voteRoundThreshold)d and on(node) ledger_node_up{%(ledgerSelector)s} == 1' % $._config,
            'for': '5m',
            labels: { severity: 'warning' },
            annotations: {
              summary: 'Vote rounds escalate on a blockchain.',
              description: |||
                A vote session on blockchain {{ $labels.blockchain }} seen by ledger node
                {{ $labels.node }} is at round {{ $value }}, above %(voteRoundThreshold)d for 5 minutes.
              ||| % $._config,
            },
          },
        ],
      },
    ],
  },
}
