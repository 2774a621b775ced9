"""`changelake chaos`: break the stack on purpose while the demo workload runs, then prove with
`verify` that every derived table and index still equals the source."""
