// Package natsjs is a placeholder until the relay lands.
package natsjs
