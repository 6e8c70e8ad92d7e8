from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('actions', '0003_partly_done'),
    ]

    operations = [
        # The claim's moment was already recorded before each request went out; it now also bounds where a lost
        # answer's attempt is looked for in the provider's logs, under the name that says so.
        migrations.RenameField(
            model_name='replayitem',
            old_name='claimed_at',
            new_name='sent_at',
        ),
        migrations.AlterField(
            model_name='replayitem',
            name='state',
            field=models.CharField(choices=[('pending', 'Waiting'), ('sending', 'Sending'), ('replayed', 'Replayed'), ('refused', 'Refused by the provider'), ('unknown', 'Answer lost: check and replay by hand if needed'), ('skipped', 'Not sent (cancelled)')], default='pending', max_length=16),
        ),
    ]
