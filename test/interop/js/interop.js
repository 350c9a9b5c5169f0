// kafkajs against paddock, for test/interop (kafkajs_test.go runs it):
//
//   node interop.js <broker,broker,...> <topic> <partitions> <group>  < records.json
//
// records.json is a JSON array of {key, value, headers: [[key, value], ...]} with every
// field base64. The script creates the topic with the admin client, produces the records
// with an idempotent producer (acks=all), record i to partition i % partitions, in batches of
// up to 50, reads the topic's offsets with the admin client, then consumes the topic from the
// beginning in consumer group <group> until it has as many records as it wrote. It prints
// one JSON object: {produced: [{partition, offset}] (by record), offsets: [{partition, low,
// high}], consumed: [{partition, offset, key, value, headers}], commits: [{partition,
// offset}] (the group's committed offsets after the consumer disconnected, read with the admin
// client)} and exits 0; any error is printed to stderr and exits 1.
//
// With INTEROP_SECURITY set, every connection is secured as it says (JSON):
// {"ca": file, "cert": file, "key": file, "sasl": {"mechanism": "scram-sha-512" |
// "scram-sha-256" | "plain", "username", "password"}} — TLS trusting the CA bundle in "ca"
// (host names checked), presenting the client certificate "cert"/"key" when given, and SASL
// when "sasl" is given.
'use strict';

const { Kafka, logLevel } = require('kafkajs');
const { security } = require('./security');

async function main() {
  const [brokers, topic, partitionsArg, groupId] = process.argv.slice(2);
  const partitions = Number(partitionsArg);
  if (!brokers || !topic || !(partitions > 0) || !groupId) {
    throw new Error('usage: node interop.js <brokers> <topic> <partitions> <group> < records.json');
  }
  const records = JSON.parse(await readStdin()).map((r) => ({
    key: Buffer.from(r.key, 'base64'),
    value: Buffer.from(r.value, 'base64'),
    headers: r.headers.map(([k, v]) => [Buffer.from(k, 'base64').toString(), Buffer.from(v, 'base64')]),
  }));
  const kafka = new Kafka({
    clientId: 'interop-kafkajs',
    brokers: brokers.split(','),
    logLevel: logLevel.WARN,
    retry: { initialRetryTime: 100, retries: 10 },
    ...security(),
  });

  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true, timeout: 20000 });

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const produced = new Array(records.length);
  for (let start = 0; start < records.length; start += 50) {
    const batch = records.slice(start, start + 50);
    const messages = batch.map((r, j) => ({
      key: r.key, value: r.value, partition: (start + j) % partitions, headers: Object.fromEntries(r.headers),
    }));
    const answers = await producer.send({ topic, acks: -1, messages });
    const base = new Map(answers.map((a) => [a.partition, BigInt(a.baseOffset)]));
    const next = new Map();
    messages.forEach((m, j) => {
      const k = next.get(m.partition) || 0n;
      next.set(m.partition, k + 1n);
      produced[start + j] = { partition: m.partition, offset: (base.get(m.partition) + k).toString() };
    });
  }
  await producer.disconnect();

  const offsets = (await admin.fetchTopicOffsets(topic)).map((o) => ({ partition: o.partition, low: o.low, high: o.high }));
  await admin.disconnect();

  const consumer = kafka.consumer({ groupId, heartbeatInterval: 500, sessionTimeout: 10000, rebalanceTimeout: 10000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const consumed = [];
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error));
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        consumed.push({
          partition,
          offset: message.offset,
          key: message.key ? message.key.toString('base64') : '',
          value: message.value ? message.value.toString('base64') : '',
          headers: Object.entries(message.headers || {}).map(([k, v]) => [Buffer.from(k).toString('base64'), v.toString('base64')]),
        });
        if (consumed.length >= records.length) {
          resolve();
        }
      },
    }).catch(reject);
  });
  await consumer.disconnect();

  // The group's committed offsets (kafkajs commits what it consumed when it disconnects).
  await admin.connect();
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
  await admin.disconnect();
  const commits = committed.partitions.map((p) => ({ partition: p.partition, offset: p.offset }));
  process.stdout.write(JSON.stringify({ produced, offsets, consumed, commits }) + '\n');
}

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on('data', (c) => chunks.push(c));
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString()));
    process.stdin.on('error', reject);
  });
}

main().catch((e) => {
  process.stderr.write(`interop.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
