# The `custom` layout of run.sh (sourced): the manual's tables renamed, as an application
# would name its own, and Handle.Net's fifteen custom statements (Technical Manual §8.1.4)
# over them, given alike to Handle.Net 9.0.0 (config.dct's sql_settings) and to handled
# ([sql]): both servers then read and write these tables only. Other layouts keep
# Handle.Net's names.
T_HANDLES=handles T_NAS=nas C_HANDLE=handle C_NA=na C_IDX=idx C_TYPE=type C_TTL_TYPE=ttl_type C_TTL=ttl C_REFS=refs
C_PERMS="admin_read, admin_write, pub_read, pub_write"
if [ "${LAYOUT:-bytes}" = custom ]; then
  T_HANDLES=pid_values T_NAS=pid_prefixes C_HANDLE=pid C_NA=prefix C_IDX=vidx C_TYPE=vtype C_TTL_TYPE=vttl_type
  C_TTL=vttl C_REFS=vrefs C_PERMS="ar, aw, pr, pw"
fi

# The renames, after db_tables made the manual's tables.
custom_tables() {
  log "custom layout: the tables renamed to $T_HANDLES and $T_NAS, every column too"
  local renames="alter table handles rename to pid_values; alter table nas rename to pid_prefixes;
alter table pid_prefixes rename column na to prefix"
  local old new
  for pair in handle:pid idx:vidx type:vtype data:vdata ttl_type:vttl_type ttl:vttl timestamp:vstamp refs:vrefs \
      admin_read:ar admin_write:aw pub_read:pr pub_write:pw; do
    old=${pair%%:*} new=${pair#*:}
    renames="$renames; alter table pid_values rename column $old to $new"
  done
  sql_as handleserver "$renames" || die "renaming the tables"
}

# KEY=SQL lines, one per statement, with JDBC's ? (handled numbers them for PostgreSQL).
custom_statements() {
  local cols="vidx, vtype, vdata, vttl_type, vttl, vstamp, vrefs, ar, aw, pr, pw"
  cat <<S
get_handle_stmt=select $cols from pid_values where pid = ?
have_na_stmt=select count(*) from pid_prefixes where prefix = ?
del_na_stmt=delete from pid_prefixes where prefix = ?
add_na_stmt=insert into pid_prefixes ( prefix ) values ( ? )
scan_handles_stmt=select distinct pid from pid_values
scan_handles_from_stmt=select distinct pid from pid_values where pid >= ? order by pid
scan_by_prefix_stmt=select distinct pid from pid_values where pid like ?
scan_nas_stmt=select distinct prefix from pid_prefixes
scan_nas_from_stmt=select distinct prefix from pid_prefixes where prefix >= ? order by prefix
delete_all_handles_stmt=delete from pid_values
delete_all_nas_stmt=delete from pid_prefixes
create_handle_stmt=insert into pid_values ( pid, $cols ) values ( ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? )
handle_exists_stmt=select count(*) from pid_values where pid = ?
delete_handle_stmt=delete from pid_values where pid = ?
modify_value_stmt=update pid_values set vtype = ?, vdata = ?, vttl_type = ?, vttl = ?, vstamp = ?, vrefs = ?, ar = ?, aw = ?, pr = ?, pw = ? where pid = ? and vidx = ?
S
}
