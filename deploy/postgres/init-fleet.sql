-- Runs once, when the compose PostgreSQL volume is created: the fleet profile's `up` keeps its
-- relational state (alerts, outbox, prices, ledger, forecasts) in a database of its own.
CREATE DATABASE infermeter_fleet OWNER infermeter;
