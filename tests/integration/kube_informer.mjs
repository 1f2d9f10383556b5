// An informer of @kubernetes/client-node against podmux's Kubernetes API
// (tests/integration/test_kube_api_node.py), unmodified: plain JS, no
// build step.  Prints one JSON line per thing it sees:
//   {"event":"list"}                    the informer listed the pods
//   {"event":"connect"}                 it (re)started its watch
//   {"event":"synced"}                  start() resolved: the first list is in
//   {"event":"add"|"update"|"delete","name":NAME,"rv":RV}
//   {"event":"error","message":TEXT}
// Arguments: the directory holding node_modules, the server URL, the
// server's CA, the client certificate and key.
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [dir, server, ca, cert, key] = process.argv.slice(2);
const k8s = await import(
    pathToFileURL(path.join(dir, 'node_modules', '@kubernetes', 'client-node', 'dist', 'index.js')).href);

function out(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

const kc = new k8s.KubeConfig();
kc.loadFromOptions({
    clusters: [{ name: 'podmux', server, caFile: ca }],
    users: [{ name: 'agent', certFile: cert, keyFile: key }],
    contexts: [{ name: 'podmux', cluster: 'podmux', user: 'agent' }],
    currentContext: 'podmux',
});
const api = kc.makeApiClient(k8s.CoreV1Api);
// Every list the informer makes goes through here: a re-watch after the
// server ends a watch must not list again.
const list = () => {
    out({ event: 'list' });
    return api.listPodForAllNamespaces();
};
const informer = k8s.makeInformer(kc, '/api/v1/pods', list);
for (const ev of ['add', 'update', 'delete']) {
    informer.on(ev, (pod) => out({ event: ev, name: pod.metadata.name, rv: pod.metadata.resourceVersion }));
}
informer.on('connect', () => out({ event: 'connect' }));
informer.on('error', (err) => {
    out({ event: 'error', message: String(err && err.message ? err.message : err) });
    // As client-node's own examples do: start again after a while.
    setTimeout(() => informer.start().catch(() => {}), 1000);
});
await informer.start();
out({ event: 'synced' });
