"""The order of waiting jobs, served as the aggregated API ``visibility.caldera.dev``
(docs/visibility.md).

- `scheduler.visibility.order`: pure: the session's waiting jobs in the order it serves them
  (``pending_order``, called once as a session closes), and the positions published from them;
- `scheduler.visibility.answers`: pure: the API's answers, other namespaces' entries hidden;
- `scheduler.visibility.requestheader`: pure: the API server's front-proxy settings and who a
  proxied request is for;
- `scheduler.visibility.server`: the HTTPS server the APIService points at;
- `scheduler.visibility.routing`: the leader's pod label the chart's Service selects.
"""
