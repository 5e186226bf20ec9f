"""The informer cache and work queues every Caldera process reads the cluster through
(client-go's informers and workqueue; docs/architecture.md, "One informer cache per process").

- `informers.reflector`: `Reflector`, LIST then WATCH of one resource type into a `Store`, with
  resume from the last resourceVersion, relist on 410 Gone and jittered backoff;
- `informers.store`: `Store`, the cache: objects by ``namespace/name``, named indexers, and
  `dispatch` of (old, new) to `ResourceEventHandler`s;
- `informers.factory`: `SharedInformerFactory` and `SharedInformer`, one reflector and store per
  kind per process, handlers, indexers, periodic resync and per-kind transforms;
- `informers.interning`: `PodInterner`, the pod informer's transform that shares the parts equal
  across cached pods;
- `informers.workqueue`: `WorkQueue`, the deduplicating, rate-limited, delaying queue of keys a
  controller's workers take from, and its rate limiters;
- `informers.metrics`: the Prometheus metrics of informers and work queues (client-go's
  ``workqueue_*`` names under the ``caldera_`` prefix).

Imports only `caldera`; pure bookkeeping except the reflector's list/watch and the factory's
tasks.
"""
