"""Operations at fleet scale: durable bulk actions by filter (cancel, reconcile), their items
and results, the operations page and streamed exports, saved views."""
