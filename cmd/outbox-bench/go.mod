module github.com/outbox-go/outbox/cmd/outbox-bench

go 1.25.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jackc/pgx/v5 v5.12.0
	github.com/jmoiron/sqlx v1.4.0
	github.com/nats-io/nats.go v1.53.1
	github.com/oklog/ulid/v2 v2.1.2
	github.com/outbox-go/outbox v0.0.0-00010101000000-000000000000
	github.com/outbox-go/outbox/otel v0.0.0-00010101000000-000000000000
	github.com/outbox-go/outbox/relay/natsjs v0.0.0-00010101000000-000000000000
	github.com/outbox-go/outbox/relay/rabbitmq v0.0.0-00010101000000-000000000000
	github.com/rabbitmq/amqp091-go v1.16.0
	go.opentelemetry.io/otel/sdk v1.46.0
	go.opentelemetry.io/otel/sdk/metric v1.46.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.18.5 // indirect
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	github.com/nats-io/nkeys v0.4.15 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.46.0 // indirect
	go.opentelemetry.io/otel/metric v1.46.0 // indirect
	go.opentelemetry.io/otel/trace v1.46.0 // indirect
	golang.org/x/crypto v0.49.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

replace (
	github.com/outbox-go/outbox => ../..
	github.com/outbox-go/outbox/otel => ../../otel
	github.com/outbox-go/outbox/relay/natsjs => ../../relay/natsjs
	github.com/outbox-go/outbox/relay/rabbitmq => ../../relay/rabbitmq
)
