"""Demo data for the shop schema (schemas/shop.sql): a bulk seeder (`seed`) and a paced OLTP
workload (`run_load`) that exercises every kind of change the pipeline must handle: inserts,
updates that leave TOASTed columns untouched, deletes, multi-table transactions and key changes."""
