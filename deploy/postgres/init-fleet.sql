-- Runs once, when the compose PostgreSQL volume is created: the fleet profile's `up` keeps its
-- relational state (alerts, outbox, prices, ledger, forecasts) in a database of its own; the ha
-- profile's pair shares another (with the leader lease).
CREATE DATABASE infermeter_fleet OWNER infermeter;
CREATE DATABASE infermeter_ha OWNER infermeter;
