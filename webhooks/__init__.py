"""The admission webhook: validation and defaulting of Jobs, Queues, PodGroups and Pods.

Pure rules, one module per resource (`jobs`, `queues`, `podgroups`, `pods`; the pod-template
checks, Kubernetes name checks and field-error messages they share with the controllers are
`caldera.api.podtemplate`, `caldera.api.names` and `caldera.api.fielderrors`), decide over models
and a `view.ClusterView` (the process gives them `lookups.InformerView`, over its informer cache);
`admission` is the AdmissionReview protocol, `review` routes a request body to the rules, and
`server` is the aiohttp HTTPS process around them (`caldera webhook`). See docs/webhook.md.
"""
