// One kafkajs record, for test/interop (security_test.go and acl_test.go run it):
//
//   INTEROP_SECURITY=... [INTEROP_LOCAL_ADDRESS=127.0.0.3] node produce_one.js <broker,broker,...> <topic>
//
// INTEROP_SECURITY is interop.js's (the CA bundle, a client certificate or SASL credentials);
// INTEROP_LOCAL_ADDRESS, when set, is the address its connections come from (a source of its
// own for the broker's authentication rate limit). The script connects a producer without
// retries and sends one record (acks=all) to <topic>. It prints {"acknowledged": true} or
// {"acknowledged": false, "error": <the kafkajs error's name>, "type": <its Kafka error
// type, or its cause's, when it has one>, "message": ...} and exits 0; it exits 2 on bad usage.
'use strict';

const net = require('net');
const tls = require('tls');
const { Kafka, logLevel } = require('kafkajs');
const { security } = require('./security');

// socketFactory is kafkajs' own, connecting from INTEROP_LOCAL_ADDRESS.
function socketFactory({ host, port, ssl, onConnect }) {
  const opts = { host, port, localAddress: process.env.INTEROP_LOCAL_ADDRESS || undefined };
  const socket = ssl
    ? tls.connect(Object.assign({ servername: host }, ssl, opts), onConnect)
    : net.connect(opts, onConnect);
  socket.setKeepAlive(true, 60000);
  return socket;
}

async function main() {
  const [brokers, topic] = process.argv.slice(2);
  if (!brokers || !topic) {
    throw new Error('usage: node produce_one.js <brokers> <topic>');
  }
  const kafka = new Kafka({
    clientId: 'interop-kafkajs-one',
    brokers: brokers.split(','),
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3000,
    retry: { retries: 0 },
    socketFactory,
    ...security(),
  });
  const producer = kafka.producer({ retry: { retries: 0 } });
  try {
    await producer.connect();
    await producer.send({ topic, acks: -1, messages: [{ key: 'one', value: 'kafkajs' }] });
  } catch (err) {
    console.log(JSON.stringify({ acknowledged: false, error: err.name, type: err.type || (err.cause && err.cause.type), message: String(err.message) }));
    return 0;
  } finally {
    await producer.disconnect().catch(() => {});
  }
  console.log(JSON.stringify({ acknowledged: true }));
  return 0;
}

main().then((code) => process.exit(code), (err) => {
  console.error(err);
  process.exit(2);
});
