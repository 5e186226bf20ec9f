"""The podgroup controller: PodGroups for pods that no Volcano Job created."""
