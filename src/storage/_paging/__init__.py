"""Deep paging: the walk on a point-in-time, its grouped form, its cursor."""
