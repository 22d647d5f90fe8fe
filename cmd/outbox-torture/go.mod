module github.com/outbox-go/outbox/cmd/outbox-torture

go 1.25.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jackc/pgx/v5 v5.12.0
	github.com/jmoiron/sqlx v1.4.0
	github.com/nats-io/nats.go v1.53.1
	github.com/outbox-go/outbox v0.0.0-00010101000000-000000000000
	github.com/outbox-go/outbox/relay/natsjs v0.0.0-00010101000000-000000000000
	github.com/outbox-go/outbox/relay/rabbitmq v0.0.0-00010101000000-000000000000
	github.com/rabbitmq/amqp091-go v1.16.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.18.5 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/nats-io/nkeys v0.4.15 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/oklog/ulid/v2 v2.1.2 // indirect
	golang.org/x/crypto v0.49.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.42.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/outbox-go/outbox => ../..
	github.com/outbox-go/outbox/relay/natsjs => ../../relay/natsjs
	github.com/outbox-go/outbox/relay/rabbitmq => ../../relay/rabbitmq
)
